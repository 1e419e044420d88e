"""The actions (spec §7.3): one table of them, and the modules that wire each group onto the layers below."""
