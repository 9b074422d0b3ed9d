/* Records a compute pass's dispatches in one native call, for the desktop runtime (wgpu-native).
 *
 * From Python, each of the three wgpu-native calls per dispatch costs ~0.6 us through cffi, and a
 * SmolLM2 decode step makes 729 of them: most of the step's host time. Python passes the plan as
 * arrays (built once per plan) and wgpu-native's own entry points, so this needs no webgpu.h. */

#include <stddef.h>
#include <stdint.h>

typedef void (*set_pipeline_fn)(void *pass, void *pipeline);
typedef void (*set_group_fn)(void *pass, uint32_t index, void *group, size_t offset_count, const uint32_t *offsets);
typedef void (*dispatch_fn)(void *pass, uint32_t x, uint32_t y, uint32_t z);

/* Dispatch i runs pipelines[i] with groups[i] at group 0 on the grid xyz[3i..3i+2]. A pipeline
 * already set is not set again (consecutive dispatches of one kernel). */
void trellis_encode_pass(void *pass, size_t n, void *const *pipelines, void *const *groups, const uint32_t *xyz,
                         set_pipeline_fn set_pipeline, set_group_fn set_group, dispatch_fn dispatch) {
    void *current = NULL;
    for (size_t i = 0; i < n; i++) {
        if (pipelines[i] != current) {
            current = pipelines[i];
            set_pipeline(pass, current);
        }
        set_group(pass, 0, groups[i], 0, NULL);
        dispatch(pass, xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]);
    }
}
