"""Values the built kernels (py/trellis/kernels, at build time) and the runtime must agree on.

Kept here, free of imports, so that the build imports them from the runtime rather than the runtime
from the build (py/trellis never imports kernels/); the build records them in the manifest and the
executor checks them, so a model built with other values is refused rather than misread.
"""

# The logit of a token the grammar's bitmask disallows, as the mask kernel writes it. WGSL has no
# infinity literal; a huge negative finite value sorts and samples the same way (and is short in
# WGSL's 7-digit literals).
MASKED_LOGIT = -3.0e38

# The step buffer every per-token kernel reads: [tokens in this run, position of the first one,
# unused, unused] (int32 words; 16 bytes, a uniform-friendly size).
STEP_WORDS = 4
