"""Reference for example_mlp.msh (examples/mlp.msh, the same program as docs/language.md, "A complete example")."""
from section11 import COMM, expected  # noqa: F401
