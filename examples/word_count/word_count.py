"""word_count: a CLI skill. Input arrives as argv (--text ...) and as the SKILL_INPUT environment variable."""

import argparse
import json
import sys


def count(text: str) -> dict:
    return {"words": len(text.split()), "lines": len(text.splitlines()), "chars": len(text)}


def main() -> None:
    parser = argparse.ArgumentParser(description="Count words, lines and characters.")
    parser.add_argument("--text", required=True, help="the text to count")
    args = parser.parse_args()
    print(f"counting {len(args.text)} characters", file=sys.stderr)  # logs go to stderr
    print(json.dumps({"ok": True, **count(args.text)}))  # stdout carries only the result


if __name__ == "__main__":
    main()
