"""--explain: a diagnostic process's stderr, where `python -X importtime` reported every first
import and the worker marked each phase's end (`ttfr-phase <mark>`), read as its ImportTrace.

`-X importtime` writes `import time: <self us> | <cumulative us> | <2 spaces a level><module>`,
a module after the modules it imported; the worker's marks go to the same unbuffered stream, so an
import falls between the marks of the phase it happened in. Inside a phase, torch.compile's
diagnostic process also marks spans (`ttfr-span wrap+` ... `wrap-`, `compile+` ... `compile-`): an
import is charged to the outermost span open when it was reported. Other lines (a library's
warnings) are skipped.
"""

from __future__ import annotations

from ttfr.child.torch_explain import SPAN_MARKER
from ttfr.child.worker import PHASE_MARKER
from ttfr.model.explanation import ImportTrace, TracedImport

MARKER = PHASE_MARKER.decode()
PREFIX = "import time:"
# The worker's marks (child/worker.py), each ending a phase; imports after the last one are `after`.
ENDED_BY = {"main": "interpreter", "imported": "import", "device_ready": "device_init", "user_imported": "user_import",
            "setup": "setup", "artifact_loaded": "artifact_load", "first": "first_call", "second": "second_call"}  # fmt: skip
SPAN_MARKER = SPAN_MARKER.decode()  # a span inside a phase, `<name>+` to `<name>-` (child/torch_explain.py)
SPANS = ("wrap", "compile")  # torch.compile(fn); one of dynamo's compiles
MAX_BYTES = 32 << 20  # torch.compile imports ~2,800 modules: ~250 KB of lines


def parse(text: str, distributions=None) -> ImportTrace:
    """The trace of one process's stderr; `distributions`: its record's map of top-level packages."""
    pending: list[tuple[str, int, int, int, str | None]] = []  # since the last mark: (module, depth, self, cum, span)
    imports: list[TracedImport] = []
    spans: list[str] = []  # the spans open now, innermost last

    def close(phase: str) -> None:
        imports.extend(TracedImport(module=m, phase=phase, depth=d, self_s=s / 1e6, cumulative_s=c / 1e6, span=span)
                       for m, d, s, c, span in pending)  # fmt: skip
        pending.clear()

    for line in text.splitlines():
        if line.startswith(MARKER):
            mark = line[len(MARKER) :].strip()
            if mark in ENDED_BY:
                close(ENDED_BY[mark])
                spans.clear()  # a span lost to a garbled line ends with its phase, never charging the next
            continue
        if line.startswith(SPAN_MARKER):
            span, edge = line[len(SPAN_MARKER) :].strip()[:-1], line.strip()[-1:]
            if span in SPANS and edge == "+":
                spans.append(span)
            elif span in SPANS and edge == "-" and span in spans:
                del spans[len(spans) - 1 - spans[::-1].index(span)]
            continue
        parsed = _import_line(line)
        if parsed:
            pending.append((*parsed, spans[0] if spans else None))
    close("after")
    return ImportTrace(imports=imports, **({"distributions": distributions} if distributions else {}))


def _import_line(line: str) -> tuple[str, int, int, int] | None:
    if not line.startswith(PREFIX):
        return None
    parts = line[len(PREFIX) :].split("|")
    if len(parts) != 3:
        return None
    try:
        self_us, cumulative_us = int(parts[0]), int(parts[1])
    except ValueError:  # the header line (`self [us]`)
        return None
    name = parts[2].rstrip("\n")
    module = name.strip()
    if not module or self_us < 0 or cumulative_us < 0:
        return None
    indent = len(name) - len(name.lstrip(" ")) - 1  # one space after the bar, then two a level
    return module, max(0, indent // 2), self_us, cumulative_us
