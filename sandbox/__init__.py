"""What runs inside the sandbox boundary of out-of-process skills: the launcher and the bubblewrap profile.

Shipped in the wheel as the data package ``skillyard.sandbox``; the host side is
:mod:`skillyard.executors.sandbox`, which reads these files. docs/sandbox.md says what each tier contains.
"""

from pathlib import Path

HERE = Path(__file__).parent
LAUNCHER = HERE / "launch.sh"
STAGER = HERE / "stage.sh"
ENTRY = HERE / "entry.py"
BWRAP_PROFILE = HERE / "bwrap.args"
