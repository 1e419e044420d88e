"""Row actions (spec §7.3, §7.4): filters and query options, reads, set-based writes, upsert and their errors."""
