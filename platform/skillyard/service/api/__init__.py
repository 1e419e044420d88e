"""The HTTP API's routers, one module per area: skills and runs, agents, chains and schedules, admin."""
