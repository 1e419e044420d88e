"""The built-in send_message skill: messages to specific people on two-way channels, through the channel adapters."""
