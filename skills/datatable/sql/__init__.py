"""The SQL channel (spec §7.6): the parser guard and its allow-lists, the execution layer and the org role."""
