"""Field types and values (spec §7.1, §7.5): logical types, value converters and a table's write validator."""
