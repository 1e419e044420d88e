"""insert_from_file (spec §7.4 批量路径): the workspace file read a chunk at a time, its rows, the COPY."""
