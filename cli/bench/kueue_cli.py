"""`berth bench --mode kueue` on the command line: read the files, run, check, print.

Exit code 0 when every workload finished and the result is within the rangespec (if given);
1 when a file is invalid, workloads were still unfinished at the timeout, or the rangespec's
checks fail (the failures are printed, and are in the JSON under `rangeCheck`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cli.bench.kueue_config import ConfigError, parse_generator, parse_rangespec, plan_of
from cli.bench.kueue_summary import check_range
from cli.commands import Args


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror or e}") from None


def finish_result(result: dict[str, Any], rangespec: str | None, text: str | None) -> int:
    """Add the range check to `result`; the exit code."""
    code = 0 if result["settled"] else 1
    if rangespec is not None and text is not None:
        spec = parse_rangespec(text, rangespec)
        failures = check_range(result, result["wallMs"], result["mCPU"], spec)
        result["rangeCheck"] = {"rangespec": rangespec, "ok": not failures, "failures": failures}
        if failures:
            code = 1
    return code


def bench_kueue(args: Args) -> int:
    from cli.bench.kueue import run_kueue

    try:
        plan = plan_of(parse_generator(_read(args.generator), args.generator))
        spec_text = _read(args.rangespec) if args.rangespec else None
        if spec_text is not None:
            parse_rangespec(spec_text, args.rangespec)  # refuse a bad file before the run
        result = run_kueue(
            plan,
            time_scale=args.time_scale,
            runtime_from=args.runtime_from,
            timeout_s=args.timeout,
            workers=args.workers,
            binders=args.binders,
            profile_dir=args.profile,
        )
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    result = {"generator": args.generator, **result}
    code = finish_result(result, args.rangespec, spec_text)
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:>24}: {value}")
    if not result["settled"]:
        print(f"error: {result['finished']} of {result['workloads']} finished", file=sys.stderr)
    for failure in result.get("rangeCheck", {}).get("failures", []):
        print(f"out of range: {failure}", file=sys.stderr)
    return code
