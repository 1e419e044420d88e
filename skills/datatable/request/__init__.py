"""Reading a request (spec §3.5): the action and parameter names it may use, and the 确认 rules."""
