"""A demo price feed: the same symbol always gets the same five closing prices (so the example chain is repeatable)."""

import datetime as dt
import hashlib


async def execute(input, context):
    symbol = input["symbol"].upper()
    seed = int(hashlib.sha256(symbol.encode()).hexdigest()[:8], 16)
    start = dt.date(2026, 11, 23)
    rows = [
        {
            "symbol": symbol,
            "day": (start + dt.timedelta(days=i)).isoformat(),
            "close": round(50 + (seed >> i) % 5000 / 100, 2),
        }
        for i in range(5)
    ]
    return {"rows": rows, "message": f"{len(rows)} prices of {symbol}"}
