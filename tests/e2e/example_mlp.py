"""Reference for example_mlp.msh (examples/mlp.msh, the same program as section 11)."""
from section11 import COMM, expected  # noqa: F401
