"""Local stand-ins for the chat vendors' APIs (Feishu, WeCom, DingTalk, Telegram, Slack) and a webhook receiver,
each a real HTTP server on 127.0.0.1 that speaks the vendor's request and error shapes."""
