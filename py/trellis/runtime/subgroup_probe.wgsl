// The subgroup probe: each of one workgroup's 64 invocations writes the subgroup size and its lane.
// Kernel variants that share loads across lanes need one size and lanes in local-index order
// (what TVM's subgroup code assumes); the desktop backend and the browser's worker run this to know.
enable subgroups;

@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) i: u32, @builtin(subgroup_size) size: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
  out[i] = size;
  out[64u + i] = lane;
}
