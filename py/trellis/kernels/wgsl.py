"""Lower a TensorIR kernel to WGSL with TVM and describe how to dispatch it.

TVM cannot run WebGPU modules itself, so the description (bindings in order, uniform layout,
workgroup size, grid) is read from the generated WGSL and the kernel's declared grid.
"""

import re

import tvm

from trellis.kernels.kernels import Kernel

_BINDING = re.compile(r"@group\(0\) @binding\((\d+)\) var<storage, (read|read_write)> (\w+)_ptr : array<([\w<>]+)>;")
_UNIFORM = re.compile(r"@group\(0\) @binding\((\d+)\) var<uniform> podArgs : PODArgs;")
_STRUCT = re.compile(r"struct PODArgs \{([^}]*)\}")
_WORKGROUP = re.compile(r"@workgroup_size\((\d+), (\d+), (\d+)\)")
_WGSL_SIZES = {"f32": 4, "i32": 4, "u32": 4}
SUBGROUPS = "enable subgroups;"  # what TVM writes when a kernel uses subgroup builtins
NO_SUBGROUP_UNIFORMITY = "diagnostic(off, subgroup_uniformity);"
MAX_STORAGE_BINDINGS = 8  # WebGPU's default maxStorageBuffersPerShaderStage: what every adapter offers


def lower(kernel: Kernel) -> tuple[str, dict]:
    """(WGSL source, dispatch description) of one kernel."""
    mod = tvm.IRModule({kernel.name: kernel.func.with_attr("global_symbol", kernel.name)})
    # Without CSE disabled, TVM adds `cse_v*` parameters that the dispatcher would have to know about.
    with tvm.transform.PassContext(config={"tirx.disable_cse_tir": True}):
        target = tvm.target.Target({"kind": "webgpu", "supports_subgroups": kernel.subgroups}, host="llvm")
        lib = tvm.tirx.build(mod, target=target)
    source = lib.imports[0].inspect_source()
    if kernel.subgroups:
        # The kernel shuffles inside branches that WGSL's uniformity analysis cannot prove uniform
        # per subgroup; kernels._computes makes whole lane groups take them together.
        source = source.replace(SUBGROUPS, SUBGROUPS + "\n" + NO_SUBGROUP_UNIFORMITY, 1)
    bindings = [
        {"binding": int(b), "name": name, "access": access, "type": ty}
        for b, access, name, ty in _BINDING.findall(source)
    ]
    uniform = _UNIFORM.search(source)
    fields = []
    offset = 0
    for line in _STRUCT.search(source).group(1).split(","):
        if not line.strip():
            continue
        name, ty = (s.strip() for s in line.split(":"))
        fields.append({"name": name, "type": ty, "offset": offset})
        offset += _WGSL_SIZES[ty]
    if [f["name"] for f in fields] != ["packGridDimX"]:
        raise ValueError(f"kernel {kernel.name} has scalar parameters {fields}; kernels read step values from buffers")
    workgroup = [int(v) for v in _WORKGROUP.search(source).groups()]
    info = {
        "entry_point": f"{kernel.name}_kernel",
        **({"features": ["subgroups"]} if kernel.subgroups else {}),
        "bindings": bindings,
        "uniform": {"binding": int(uniform.group(1)), "size": max(16, offset), "fields": fields},
        "workgroup_size": workgroup,
        "grid": list(kernel.grid),
    }
    if len(bindings) > MAX_STORAGE_BINDINGS:
        raise ValueError(f"kernel {kernel.name} binds {len(bindings)} storage buffers; WebGPU guarantees {MAX_STORAGE_BINDINGS}")
    if kernel.grid[0] > 65535 or kernel.grid[1] > 65535:
        raise ValueError(f"kernel {kernel.name} grid {kernel.grid} exceeds 65535 workgroups per dimension")
    return source, info
