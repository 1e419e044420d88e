"""The built-in skills, shipped in the wheel; each sub-folder is an ordinary skill folder."""
