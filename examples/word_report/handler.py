"""Count words and return the counts as a CSV artifact in the session workspace."""

import csv
from collections import Counter
from pathlib import Path


async def execute(input_data, runtime_context):
    counts = Counter(word.strip(".,;:!?\"'()").lower() for word in input_data["text"].split())
    counts.pop("", None)
    report = Path(runtime_context["workspace_dir"]) / "word_counts.csv"
    with report.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["word", "count"])
        writer.writerows(counts.most_common())
    top = ", ".join(f"{w} ({n})" for w, n in counts.most_common(3))
    return {
        "ok": True,
        "words": sum(counts.values()),
        "distinct": len(counts),
        "filename": report.name,
        "local_path": str(report),
        "media": "file",
        "user_message": f"Most frequent: {top}. The full counts are in {report.name}.",
    }
