"""The report's JSON schema (docs/report-schema.md explains every field).

The version is "major.minor": a renderer accepts any minor of the major it knows; a
field is only ever added in a minor, and removed or changed in meaning in a major.
"""

from __future__ import annotations

from xlanb.report.sharding import DEVICES_SCHEMA

REPORT_SCHEMA_VERSION = "1.6"
MIME_TYPE = "application/vnd.xlanb.report+json"

_where = {"type": ["object", "null"], "required": ["text"], "properties": {
    "text": {"type": "string"}, "filename": {"type": "string"}, "lineno": {"type": "integer"},
    "function": {"type": "string"}, "source": {"type": "string"}, "cell": {"type": ["integer", "null"]}}}
_tensor = {"type": "object", "required": ["shape", "dtype", "text"], "properties": {
    "shape": {"type": "array", "items": {"type": "integer"}}, "dtype": {"type": "string"},
    "text": {"type": "string"}}}
_tensors = {"type": "array", "items": _tensor}
_ms = {"type": "number", "minimum": 0}
_count = {"type": "integer", "minimum": 0}
_ir_line = {"type": "object", "required": ["index", "op", "type", "operands", "text"], "properties": {
    "index": _count, "op": {"type": "string"}, "type": {"type": "string"},
    "operands": {"type": "array", "items": _count}, "attrs": {"type": "string"},
    "location": {"type": "string"}, "roots": {"type": "array", "items": _count},
    "is_input": {"type": "boolean"}, "scope": {"type": ["string", "null"]}, "text": {"type": "string"}}}
_ir = {"type": "object", "required": ["lines", "text", "nodes", "truncated"], "properties": {
    "lines": {"type": "array", "items": _ir_line}, "text": {"type": "string"}, "nodes": _count,
    "truncated": {"type": "boolean"}}}
_dag = {"type": ["object", "null"], "required": ["nodes", "drawn", "collapsed", "svg"], "properties": {
    "nodes": _count, "drawn": _count, "collapsed": {"enum": ["none", "groups", "layers", "modules"]},
    "svg": {"type": "string"}}}
_hlo_text = {"type": ["object", "null"], "required": ["text", "lines", "truncated"], "properties": {
    "text": {"type": "string"}, "lines": _count, "truncated": {"type": "boolean"}}}
_recompile = {"type": ["object", "null"], "required": ["graph", "key", "against", "text", "changes"], "properties": {
    "graph": {"type": "string"}, "key": {"type": "string"}, "against": {"type": "string"},
    "text": {"type": "string"},
    "changes": {"type": "array", "items": {"type": "object", "required": ["kind", "text"], "properties": {
        "kind": {"type": "string"}, "index": {"type": "integer"}, "before": {"type": "string"},
        "after": {"type": "string"}, "location": {"type": "string"}, "text": {"type": "string"}}}}}}
_modules = {"type": ["object", "null"], "required": ["groups", "dag", "expanded"], "properties": {
    "groups": {"type": "array", "items": {"type": "object", "required": ["path", "ops", "total", "top"],
                                          "properties": {"path": {"type": "string"}, "ops": _count,
                                                         "total": _count, "top": {"type": "string"}}}},
    "dag": _dag, "expanded": {"type": "object", "additionalProperties": _dag}}}
_cost = {"type": ["number", "null"], "minimum": 0}
_fusion = {"type": "object", "required": ["name", "kind", "nodes", "ops", "modules", "lines", "out_bytes", "text"],
           "properties": {"name": {"type": "string"}, "kind": {"type": "string"},
                          "nodes": {"type": "array", "items": _count},
                          "ops": {"type": "array", "items": {"type": "string"}},
                          "modules": {"type": "array", "items": {"type": "string"}},
                          "lines": {"type": "array", "items": {"type": "string"}},
                          "out_bytes": _count, "text": {"type": "string"},
                          "flops": _cost, "transcendentals": _cost, "bytes_accessed": _cost}}
_failure = {"type": ["object", "null"], "required": ["error", "op", "where", "highlight", "text"], "properties": {
    "error": {"type": "string"}, "op": {"type": "string"}, "where": _where,
    "highlight": {"type": "array", "items": _count}, "text": {"type": "string"}}}
_holder = {"type": "object", "required": ["name", "kind", "bytes", "tensors", "pending", "change"], "properties": {
    "name": {"type": "string"}, "kind": {"type": "string"}, "bytes": _count, "tensors": _count,
    "pending": _count, "change": {"type": ["integer", "null"]}}}
_memory = {"type": ["object", "null"],
           "required": ["holders", "others", "others_bytes", "attributed", "total", "change", "device", "capacity",
                        "stats", "warnings", "text"],
           "properties": {"holders": {"type": "array", "items": _holder}, "others": _count, "others_bytes": _count,
                          "attributed": _count, "total": _count, "change": {"type": ["integer", "null"]},
                          "device": {"type": "string"}, "capacity": {"type": ["integer", "null"]},
                          "stats": {"type": ["object", "null"]},
                          "warnings": {"type": "array", "items": {"type": "string"}}, "text": {"type": "string"}}}
_reasons = {"type": "array", "items": {"type": "object", "required": ["reason", "count"], "properties": {
    "reason": {"type": "string"}, "count": _count}}}
_replay = {"type": ["object", "null"], "required": ["functions", "lines"], "properties": {
    "functions": {"type": "array", "items": {"type": "object",
                                             "required": ["name", "calls", "host_ms", "per_call_us", "keys",
                                                          "misses", "not_replayable", "lines"],
                                             "properties": {"name": {"type": "string"}, "calls": _count,
                                                            "host_ms": _ms, "per_call_us": _ms,
                                                            "keys": {"type": "array", "items": {"type": "string"}},
                                                            "donated": _count, "misses": _reasons,
                                                            "not_replayable": _reasons,
                                                            "lines": {"type": "array",
                                                                      "items": {"type": "string"}}}}},
    "lines": {"type": "array", "items": {"type": "string"}}}}
_error = {"anyOf": [{"type": "number", "minimum": 0}, {"enum": ["inf", "nan"]}]}    # JSON has no inf, NaN
_tol = {"anyOf": [{"type": "number", "minimum": 0}, {"enum": ["inf"]}, {"type": "null"}]}
_compare_row = {"type": "object", "required": ["index", "op", "location", "module", "phase", "status", "max_abs",
                                               "max_rel"],
                "properties": {"index": _count, "op": {"type": "string"}, "location": {"type": "string"},
                               "module": {"type": "string"}, "phase": {"enum": ["forward", "backward"]},
                               "status": {"enum": ["ok", "introduced", "inherited"]}, "max_abs": _error,
                               "max_rel": _error, "shape": {"type": "array", "items": _count},
                               "dtype": {"type": "string"}}}
_compare = {"type": ["object", "null"], "required": ["regions", "lines"], "properties": {
    "regions": {"type": "array", "items": {
        "type": "object",
        "required": ["ok", "ops", "skipped", "rtol", "atol", "precision", "hint", "differ", "first", "rows",
                     "hidden", "text", "lines"],
        "properties": {"ok": {"type": "boolean"}, "ops": _count, "skipped": _count, "rtol": _tol, "atol": _tol,
                       "precision": {"type": "string"}, "hint": {"type": "string"}, "differ": _count,
                       "first": {"anyOf": [_compare_row, {"type": "null"}]},
                       "rows": {"type": "array", "items": _compare_row}, "hidden": _count,
                       "text": {"type": "string"}, "detail": {"type": "string"},
                       "lines": {"type": "array", "items": {"type": "string"}}}}},
    "lines": {"type": "array", "items": {"type": "string"}}}}
_graph = {"type": "object", "required": ["name", "key", "eager", "cause", "nodes", "inputs", "outputs",
                                          "lower_ms", "compile_ms", "executions", "execute_ms", "ir"],
          "properties": {
              "name": {"type": "string"}, "key": {"type": "string"}, "eager": {"type": "boolean"},
              "cause": {"type": "string"}, "where": _where, "nodes": _count, "inputs": _tensors,
              "outputs": _tensors, "scalars": _count, "matmul_precision": {"enum": ["highest", "high", "medium"]},
              "compile_effort": {"enum": ["default", "fast"]}, "lower_ms": _ms, "compile_ms": _ms,
              "persistent_hit": {"type": "boolean"}, "executions": _count, "execute_ms": _ms,
              "fallback_ops": {"type": "array", "items": {"type": "string"}}, "recompile": _recompile,
              "ir": _ir, "dag": _dag, "modules": _modules, "fusions": {"type": "array", "items": _fusion},
              "hlo": {"type": "object", "properties": {"stablehlo": _hlo_text, "optimized": _hlo_text}},
              "cost": {"type": ["object", "null"], "additionalProperties": {"type": "number"}},
              "memory": {"type": ["object", "null"], "additionalProperties": {"type": "number"}}}}
_transfer = {"type": "object", "required": ["count", "bytes", "ms"],
             "properties": {"count": _count, "bytes": _count, "ms": _ms}}

SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://xlanb.dev/schemas/report-1.json",
    "title": "xlanb cell report",
    "type": "object",
    "required": ["version", "cell", "summary", "graphs", "cached", "eager", "forced", "fallbacks",
                 "recompiles", "pending", "errors", "timeline", "text"],
    "properties": {
        "version": {"type": "string", "pattern": r"^1\.\d+$"},
        "torch_compile": {"type": ["object", "null"], "required": ["graphs", "breaks", "recaptures", "lines"],
                          "properties": {
                              "graphs": {"type": "array", "items": {"type": "object", "required": [
                                  "name", "kind", "path", "ops", "inputs", "reason", "location"], "properties": {
                                  "name": {"type": "string"}, "kind": {"enum": ["forward", "backward", "inference"]},
                                  "path": {"enum": ["macro", "replay"]}, "ops": _count, "inputs": _count,
                                  "reason": {"type": "string"}, "location": {"type": "string"}}}},
                              "breaks": {"type": "array", "items": {"type": "object", "required": ["reason", "location"]}},
                              "recaptures": {"type": "array", "items": {"type": "object",
                                                                        "required": ["reason", "location"]}},
                              "lines": {"type": "array", "items": {"type": "string"}}}},
        "state": {"type": ["object", "null"], "properties": {
            "mode": {"enum": ["eager", "lazy"]}, "pending_nodes": {"type": "integer", "minimum": 0},
            "cache_size": {"type": "integer", "minimum": 0}}},
        "cell": {"type": "object", "required": ["execution_count", "mode", "style"], "properties": {
            "execution_count": {"type": ["integer", "null"]}, "cell_id": {"type": ["string", "null"]},
            "mode": {"enum": ["eager", "lazy", "compiled"]}, "style": {"enum": ["on", "compact", "full"]},
            "wall_ms": _ms}},
        "summary": {"type": "object", "required": ["graphs_compiled", "graphs_executed", "cache_hits",
                                                   "cache_misses", "compile_ms", "execute_ms", "text"],
                    "properties": {
                        "graphs_compiled": _count, "graphs_executed": _count,
                        "eager_ops_compiled": _count, "eager_ops_executed": _count,
                        "cache_hits": _count, "cache_misses": _count, "persistent_hits": _count,
                        "lower_ms": _ms, "compile_ms": _ms, "execute_ms": _ms, "syncs": _count,
                        "replayed": _count,
                        "forced": _count, "fallbacks": _count,
                        "to_device": _transfer, "from_device": _transfer, "text": {"type": "string"}}},
        "graphs": {"type": "array", "items": _graph},
        "cached": {"type": "array", "items": {"type": "object", "required": ["name", "key", "executions"],
                                              "properties": {"name": {"type": "string"}, "key": {"type": "string"},
                                                             "executions": _count, "execute_ms": _ms}}},
        "eager": {"type": "object", "required": ["ops", "compiles", "executions"], "properties": {
            "ops": {"type": "array", "items": {"type": "object", "required": ["op", "signature", "compiles"],
                                               "properties": {"op": {"type": "string"},
                                                              "signature": {"type": "string"},
                                                              "compiles": _count, "compile_ms": _ms}}},
            "compiles": _count, "executions": _count, "compile_ms": _ms, "execute_ms": _ms}},
        "forced": {"type": "array", "items": {"type": "object", "required": ["kind", "cause", "graph", "count"],
                                              "properties": {"kind": {"enum": ["value", "violation"]},
                                                             "cause": {"type": "string"},
                                                             "graph": {"type": "string"}, "where": _where,
                                                             "count": _count}}},
        "fallbacks": {"type": "array", "items": {"type": "object", "required": ["op", "reason", "count"],
                                                 "properties": {"op": {"type": "string"},
                                                                "reason": {"type": "string"},
                                                                "graphs": {"type": "array",
                                                                           "items": {"type": "string"}},
                                                                "where": _where, "count": _count}}},
        "recompiles": {"type": "array", "items": _recompile},
        "pending": {"type": ["object", "null"], "required": ["nodes", "tensors", "unnamed", "ir"], "properties": {
            "nodes": _count, "unnamed": _count, "ir": _ir, "dag": _dag, "modules": _modules, "failure": _failure,
            "tensors": {"type": "array", "items": {"type": "object", "required": ["name", "type"],
                                                   "properties": {"name": {"type": "string"},
                                                                  "type": {"type": "string"}}}}}},
        "errors": {"type": "array", "items": {"type": "string"}},
        "memory": _memory,
        "timeline": {"type": "object", "required": ["spans", "svg"], "properties": {
            "spans": {"type": "array", "items": {"type": "object", "required": ["kind", "name", "start_ms", "ms"],
                                                 "properties": {"kind": {"enum": ["lower", "compile", "execute",
                                                                                  "transfer"]},
                                                                "name": {"type": "string"},
                                                                "start_ms": {"type": "number"}, "ms": _ms}}},
            "omitted": _count, "svg": {"type": "string"}}},
        "devices": DEVICES_SCHEMA,
        "replay": _replay,
        "compare": _compare,
        "text": {"type": "string"},
    },
}
