"""Parse Dynamo guard-failure texts ("recompile reasons") into a kind, a source and values.

Standard library only: the compile collector runs this inside the recorded program, where importing
anything heavy would change what is measured, and analyzers must load without torch.

The texts come from torch/_dynamo/guards.py (`get_guard_fail_reason`) and the C++ guard manager.
Their shape drifts between torch versions, so every rule here is a best effort and anything not
recognised is kept as kind "unknown" with its raw text, never an exception.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Literal, TypeAlias, cast

from diag.trace.guard_vocabulary import GuardCheck
from diag.trace.guard_vocabulary import entry as vocabulary_entry
from diag.trace.numerals import parse_int

GuardKind = Literal[
    "tensor-size",
    "tensor-stride",
    "tensor-dtype",
    "tensor-device",
    "tensor-requires-grad",
    "tensor-other",
    "python-value",
    "object-identity",
    "type",
    "container-length",
    "container-keys",
    "global-state",
    "unknown",
]


@dataclass(frozen=True)
class GuardFailure:
    """One failed guard of one cache entry, as analyzers group and explain it."""

    compile_id: str | None
    kind: GuardKind
    source: str | None
    expected: str | None
    actual: str | None
    user_location: str | None
    raw: str


# "0/3: ", "!1/0/3: " (compiled autograd), "0/3_1: "; a "- " bullet when copied from TORCH_LOGS.
_COMPILE_ID = re.compile(r"^\s*(?:-\s+)?(?:(?P<cid>!?\d+(?:/\d+)+(?:_\d+)?)|None):(?:\s+|$)")
# Dynamo pads the guard to 60 columns and appends "  # <code line>  # <file>:<line> in <fn>".
_COMMENT_START = re.compile(r"\s{2,}#(?:\s|$)")
_COMMENT_START_LOOSE = re.compile(r"\s#\s")
_LOCATION = re.compile(r"#\s+(?P<loc>[^\s#()]+:\d+) in [^\s()]+")
_HINT = re.compile(r" \((?:HINT|user code shown|_dynamo/)")

_TENSOR = re.compile(
    r"^tensor '(?P<name>.+)' (?P<what>[A-Za-z_][A-Za-z_ ]*?) mismatch\b(?P<rest>.*)$"
)
_TENSOR_VALUES = re.compile(
    r"[Ee]xpected (?:device index to be )?(?P<expected>.+?)(?:, actual (?P<actual>.+))?$"
)
_DISPATCH_FIRST_KEY = re.compile(r"DispatchKeySet\((?P<key>\w+)")
_DISPATCH_PREFIX = re.compile(r"^(?:SparseCsr|Sparse|Quantized|NestedTensor|Nested|Autograd)")
_TENSOR_TYPE = re.compile(
    r"^expected type of '(?P<src>.+)' to be a tensor type, ?'? but found (?P<actual>.+)$"
)
_DUPLICATE = re.compile(r"^Duplicate tensors? found:?\s*(?P<what>.*)$")
_BACKEND_MATCH = re.compile(
    r"^BACKEND_MATCH failure\b.*?Cached backend: (?P<expected>.+?)\. New backend: (?P<actual>.+?)\."
    r"(?: If |$)"
)
_INVALIDATED = re.compile(r"^Cache line invalidated because (?P<src>.+) got deallocated")

_GLOBAL_CHANGED = re.compile(r"^GLOBAL_STATE changed:\s*(?P<what>.*)$")
_GLOBAL_CHECK = re.compile(r"___check_global_state\(\)(?: against (?P<expected>.+))?")
_GLOBAL_CALL = re.compile(
    r"___check_torch_function_mode_stack\(\)|___is_grad_enabled\(\)"
    r"|___are_deterministic_algorithms_enabled\(\)|___is_torch_function_enabled\(\)"
)
_CURRENT_DEVICE = re.compile(r"^(?P<src>utils_device\.CURRENT_DEVICE) == (?P<expected>.+)$")
_GLOBAL_WORDS = re.compile(
    r"GLOBAL_STATE|grad_mode|grad_enabled|autocast|torch function mode|torch_function_mode"
    r"|deterministic_algorithms|CURRENT_DEVICE"
)

_OBJ_ID = re.compile(
    r"^(?:not )?___check_obj_id\((?P<src>.+), (?P<id>-?\d+)\)(?:, type=(?P<type><.+>))?"
)
_TYPE_ID = re.compile(
    r"^(?:not )?___check_type_id\((?P<src>.+), (?P<id>-?\d+)\)(?:, type=(?P<type><.+>))?"
)
_CURRENT_BACKEND = re.compile(r"^___check_current_backend\((?P<expected>.*)\)$")
_ISINSTANCE = re.compile(r"^(?:not )?isinstance\((?P<src>.+), (?P<type>[^,()]+)\)$")
_TYPE_IS = re.compile(r"^type\((?P<src>.+)\) is (?P<type>.+)$")

_DICT_CONTAINS = re.compile(r"^(?P<neg>not )?___dict_contains\((?P<key>.+?), (?P<src>.+)\)$")
_CONTAINS = re.compile(
    r"^(?P<neg>not )?(?:set|frozenset|dict)\.__contains__\((?P<src>.+), (?P<key>.+?)\)$"
)
_HASATTR = re.compile(r"^(?P<neg>not )?hasattr\((?P<src>.+), (?P<key>'[^']*'|\"[^\"]*\")\)$")
_DICT_KEYS = re.compile(r"^list\(dict\.keys\((?P<src>.+)\)\)(?:\[\d+\])? == (?P<expected>.+)$")
_DICT_VERSION = re.compile(r"^___(?:dict_version|key_to_id)\((?P<src>.+?)\)(?: == (?P<exp>.+))?$")

_LEN = re.compile(r"^len\((?P<src>.+)\) (?P<op>==|!=|>=|<=|>|<) (?P<n>-?\d+)$")
_SYM_PROP = re.compile(r"\.(?P<prop>size|stride)\(\)|\.(?P<offset>storage_offset)\(\)")
_IS_NONE = re.compile(r"^(?P<src>.+?) is (?P<neg>not )?None$")
_EQ = re.compile(r"^(?P<src>.+?) (?P<op>==|!=) (?P<value>.+)$")
_REL = re.compile(r"^(?P<left>.+?) (?:<=|>=|<|>) (?P<right>.+)$")
_SOURCE_LIKE = re.compile(r"^[A-Za-z_(][^=<>!]*$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d*)?$")
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


def parse_recompile_reasons(payload: str) -> list[GuardFailure]:
    """`recompile_reasons` artifacts say encoding json, but one reason arrives as raw text, several
    as a JSON list of strings.

    An empty payload gives no reasons; anything else gives at least one, and nothing raises.
    """
    if not isinstance(payload, str):
        payload = str(payload)
    stripped = payload.strip()
    if not stripped:
        return []
    if stripped[0] in '["':
        try:
            decoded: object = json.loads(stripped)
        except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested too deep
            decoded = None
        if isinstance(decoded, list):
            return [
                parse_guard_failure(item if isinstance(item, str) else json.dumps(item))
                for item in decoded
            ]
        if isinstance(decoded, str):
            return [parse_guard_failure(decoded)]
    return [parse_guard_failure(payload)]


def parse_guard_failure(text: str) -> GuardFailure:
    """Classify one reason; only its first line is the guard, later lines (the user stack) stay
    in `raw` for display."""
    try:
        return _parse(text)
    except Exception:  # a collector inside the user's program must never fail on odd text
        return GuardFailure(None, "unknown", None, None, None, None, _as_text(text))


def _as_text(text: object) -> str:
    return text if isinstance(text, str) else str(text)


def _parse(text: str) -> GuardFailure:
    raw = _as_text(text)
    line = raw.split("\n", 1)[0].strip()
    compile_id: str | None = None
    prefix = _COMPILE_ID.match(line)
    if prefix is not None:
        compile_id = prefix.group("cid")
        line = line[prefix.end() :]
    expr, comment = _split_comment(line)
    kind, source, expected, actual = _classify(expr)
    # The vocabulary decides the family where it knows the check; the rules above keep the
    # source and values (and the kind of texts the vocabulary does not know).
    family = vocabulary_entry(guard_check(raw)).family
    if family != "unknown":
        kind = cast(GuardKind, family)
    return GuardFailure(
        compile_id=compile_id,
        kind=kind,
        source=source,
        expected=expected,
        actual=actual,
        user_location=_user_location(comment),
        raw=raw,
    )


def _split_comment(line: str) -> tuple[str, str | None]:
    """Separate the guard expression from Dynamo's trailing `# code  # file:line in fn` note."""
    match = _COMMENT_START.search(line)
    if match is None:
        # Texts whose padding was collapsed: split only where a location follows.
        match = _COMMENT_START_LOOSE.search(line)
        if match is None or _LOCATION.search(line, match.start()) is None:
            return line, None
    return line[: match.start()].rstrip(), line[match.end() :].strip()


def _user_location(comment: str | None) -> str | None:
    """The last `# file:line in fn` of the note: earlier `#`s belong to the user's code line, and
    a parenthesised location after it is torch's own frame."""
    if not comment:
        return None
    hint = _HINT.search(comment)
    if hint is not None:
        comment = comment[: hint.start()]
    found: str | None = None
    for match in _LOCATION.finditer("# " + comment):
        found = match.group("loc")
    return found


_Classified: TypeAlias = "tuple[GuardKind, str | None, str | None, str | None]"

_STACK_FILE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_FILE_LINE = re.compile(r"^(?P<file>.+):(?P<line>\d+)$")


def full_user_location(user_location: str | None, raw: str) -> str | None:
    """The guard's `file:line` with the full path from its user stack. torch shortens the note's
    path against its own install folder and, when the two share only "/", drops one character
    too many (/work/main/app.py -> ork/main/app.py); the stack in `raw` keeps the whole path."""
    match = _FILE_LINE.match(user_location or "")
    if match is None:
        return user_location
    short, line = match.group("file"), match.group("line")
    for found in _STACK_FILE.finditer(raw):
        if found.group("line") == line and found.group("file").endswith(short):
            return f"{found.group('file')}:{line}"
    return user_location


# A line of Dynamo's guard tree (the `dynamo_cpp_guards_str` artifact, str(guard_manager)):
# "| | +- DictGuardManager: source=L['block'].state.config, accessed_by=..." for a manager,
# "| | | +- DICT_CONTAINS: not ___dict_contains('k', ...)   # code  # file.py:52 in fn" for a guard.
_TREE_LINE = re.compile(r"^(?P<indent>[\s|]*)\+- (?P<name>\w+): (?P<rest>.*)$")
_TREE_SOURCE = re.compile(r"^source=(?P<source>.+?), (?:accessed_by|type)=")
_TREE_ROOT = re.compile(r"^[LG]\[(?P<q>['\"])(?P<name>[^'\"]+)(?P=q)\]")
#: At most this many sources per compile are kept (a model's guard tree has thousands of lines).
MAX_TREE_SOURCES = 256


def guard_tree_locations(tree: str) -> dict[str, str]:
    """Per guarded source of one compile's guard tree, the first user line a guard on it (or on
    a value reached through it) was installed for: `block.state.config` -> `wan.py:52`. Dynamo's
    recompile reason for a container-length guard names no line; the tree's sibling guards on the
    same source do. Sources are written as recompile reasons write them (`L['x']` as `x`)."""
    found: dict[str, str] = {}
    managers: list[tuple[int, str]] = []  # (depth, source) of the enclosing managers
    for line in tree.splitlines():
        match = _TREE_LINE.match(line)
        if match is None:
            continue
        depth = len(match.group("indent"))
        while managers and managers[-1][0] >= depth:
            managers.pop()
        rest = match.group("rest")
        source = _TREE_SOURCE.match(rest)
        if source is not None:
            text = readable_source(source.group("source"))
            managers.append((depth, _TREE_ROOT.sub(lambda m: m.group("name"), text)))
            continue
        where = _user_location(_split_comment(rest)[1])
        if where is None or "_dynamo/" in where:
            continue
        for _, owner in managers:
            if owner not in found and len(found) < MAX_TREE_SOURCES:
                found[owner] = where
    return found


def _classify(expr: str) -> _Classified:
    """Rules in order of specificity: the C++ tensor messages and named checks first, so generic
    `a == b` matching cannot claim them."""
    if expr.startswith("tensor '"):
        tensor = _tensor_mismatch(expr)
        if tensor is not None:
            return tensor
    for rule in _RULES:
        result = rule(expr)
        if result is not None:
            return result
    return "unknown", None, None, None


def _tensor_mismatch(expr: str) -> _Classified | None:
    match = _TENSOR.match(expr)
    if match is None:
        return None
    name, what, rest = match.group("name"), match.group("what").strip(), match.group("rest")
    expected: str | None = None
    actual: str | None = None
    values = _TENSOR_VALUES.search(rest)
    if values is not None:
        expected = values.group("expected").strip()
        actual_text = values.group("actual")
        if actual_text is not None:
            actual = actual_text.split("; ", 1)[0].strip()
    kind: GuardKind
    lowered = what.lower()
    if lowered == "size":
        kind = "tensor-size"
    elif lowered == "stride":
        kind = "tensor-stride"
    elif lowered == "dtype":
        kind = "tensor-dtype"
    elif lowered == "requires_grad":
        kind = "tensor-requires-grad"
    elif "device" in lowered:
        kind = "tensor-device"
    elif lowered == "dispatch key set":
        # Moving a tensor to another device changes its backend key: CPU -> CUDA shows up here,
        # not as a device mismatch. Same backend (sparse, inference tensors) is something else.
        exp_backend, act_backend = _dispatch_backend(expected), _dispatch_backend(actual)
        moved = exp_backend is not None and act_backend is not None and exp_backend != act_backend
        kind = "tensor-device" if moved else "tensor-other"
    else:
        # "rank mismatch" and future fields: a rank change is not fixed by dynamic shapes.
        kind = "tensor-other"
    return kind, _local_name(name), expected, actual


#: torch 2.6 and 2.7 name a frame's local in a tensor guard as `L['x']`; later releases as `x`.
_LOCAL_ONLY = re.compile(r"^L\[['\"](?P<name>[A-Za-z_]\w*)['\"]\]$")


def _local_name(name: str) -> str:
    """A tensor guard's subject as the newest torch writes it (`L['x']` -> `x`), so a recording
    made on torch 2.6 reads as one made on 2.13 (collectors/torch_api.py lists the drift)."""
    match = _LOCAL_ONLY.match(name)
    return match.group("name") if match is not None else name


def _dispatch_backend(keyset: str | None) -> str | None:
    if keyset is None:
        return None
    match = _DISPATCH_FIRST_KEY.search(keyset)
    if match is None:
        return None
    return _DISPATCH_PREFIX.sub("", match.group("key"))


def _rule_special(expr: str) -> _Classified | None:
    """Whole-sentence messages that are not guard expressions."""
    match = _TENSOR_TYPE.match(expr)
    if match is not None:
        return "type", match.group("src"), "tensor", match.group("actual").strip()
    match = _DUPLICATE.match(expr)
    if match is not None:
        return "tensor-other", match.group("what") or None, None, None
    if expr.startswith("BACKEND_MATCH"):
        backend = _BACKEND_MATCH.match(expr)
        if backend is None:
            return "object-identity", "backend", None, None
        return "object-identity", "backend", backend.group("expected"), backend.group("actual")
    match = _CURRENT_BACKEND.match(expr)
    if match is not None:
        return "object-identity", "backend", match.group("expected") or None, None
    match = _INVALIDATED.match(expr)
    if match is not None:
        return "object-identity", match.group("src"), None, "deallocated"
    return None


def _rule_global(expr: str) -> _Classified | None:
    match = _GLOBAL_CHANGED.match(expr)
    if match is not None:
        return "global-state", match.group("what").strip() or None, None, None
    match = _GLOBAL_CHECK.search(expr)
    if match is not None:
        return "global-state", "global_state", match.group("expected"), None
    match = _GLOBAL_CALL.search(expr)
    if match is not None:
        name = match.group(0)[3:-2]
        return "global-state", name.removeprefix("check_"), None, None
    match = _CURRENT_DEVICE.match(expr)
    if match is not None:
        return "global-state", match.group("src"), match.group("expected"), None
    return None


def _rule_identity(expr: str) -> _Classified | None:
    if expr.startswith(("___check_obj_id(", "not ___check_obj_id(")):
        match = _OBJ_ID.match(expr)
        if match is not None:
            # The id is what is compared; it means nothing outside the process, but the type
            # says less still (often <class 'code'>).
            return "object-identity", match.group("src"), match.group("id"), None
    if expr.startswith(("___check_type_id(", "not ___check_type_id(")):
        match = _TYPE_ID.match(expr)
        if match is not None:
            return "type", match.group("src"), match.group("type") or match.group("id"), None
    match = _ISINSTANCE.match(expr) or _TYPE_IS.match(expr)
    if match is not None:
        return "type", match.group("src"), match.group("type"), None
    return None


def _rule_container(expr: str) -> _Classified | None:
    match = _DICT_CONTAINS.match(expr) or _CONTAINS.match(expr) or _HASATTR.match(expr)
    if match is not None:
        key = match.group("key")
        return "container-keys", match.group("src"), f"not {key}" if match["neg"] else key, None
    match = _DICT_KEYS.match(expr)
    if match is not None:
        return "container-keys", match.group("src"), match.group("expected"), None
    match = _DICT_VERSION.match(expr)
    if match is not None:
        return "container-keys", match.group("src"), match.group("exp"), None
    match = _LEN.match(expr)
    if match is not None:
        # torch's C++ dict guard says `len(x) != 3` meaning "the length is no longer 3": the
        # number is the cached (expected) length in both spellings.
        op, number = match.group("op"), match.group("n")
        expected = number if op in ("==", "!=") else f"{op} {number}"
        return "container-length", match.group("src"), expected, None
    return None


def _rule_symbolic(expr: str) -> _Classified | None:
    """Symbolic shape guards (`2 <= x.size()[0]`, `a.stride()[0] == 192*a.size()[1]`): the first
    size/stride/offset named decides the kind."""
    match = _SYM_PROP.search(expr)
    if match is None:
        return None
    kind: GuardKind
    if match.group("offset"):
        kind = "tensor-other"
    elif match.group("prop") == "stride":
        kind = "tensor-stride"
    else:
        kind = "tensor-size"
    source = _source_before(expr, match.start()) or None
    expected = expr
    left, sep, right = expr.partition(" == ")
    if sep:
        expected = right if match.start() < len(left) else left
    return kind, source, expected, None


def _source_before(expr: str, end: int) -> str:
    """Walk back over a source expression such as `rotary_emb[0]._base` that ends at `end`."""
    i = end
    while i > 0:
        char = expr[i - 1]
        if char in _IDENT_CHARS:
            i -= 1
        elif char == "]":
            depth = 0
            j = i - 1
            while j >= 0:
                if expr[j] == "]":
                    depth += 1
                elif expr[j] == "[":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            if j < 0:
                break
            i = j
        else:
            break
    return expr[i:end].lstrip(".")


def _rule_value(expr: str) -> _Classified | None:
    match = _IS_NONE.match(expr)
    if match is not None and _SOURCE_LIKE.match(match.group("src")):
        return "python-value", match.group("src"), "not None" if match["neg"] else "None", None
    match = _EQ.match(expr)
    if match is not None and _SOURCE_LIKE.match(match.group("src")):
        value = match.group("value")
        # `x != 3` keeps the number as expected, the same convention as `len(x) != 3`.
        return "python-value", match.group("src"), value, None
    match = _REL.match(expr)
    if match is not None:
        # Dynamic ints: `6 <= n`; the side that is not a number is the source.
        left, right = match.group("left"), match.group("right")
        for side, other in ((right, left), (left, right)):
            if _NUMBER.match(other) and _SOURCE_LIKE.match(side) and not _NUMBER.match(side):
                return "python-value", side, expr, None
    return None


def _rule_global_words(expr: str) -> _Classified | None:
    """Last resort for global-state texts of other torch versions."""
    if _GLOBAL_WORDS.search(expr):
        return "global-state", None, None, None
    return None


_RULES = (
    _rule_special,
    _rule_global,
    _rule_identity,
    _rule_container,
    _rule_symbolic,
    _rule_value,
    _rule_global_words,
)


# --- the check: which entry of diag.trace.guard_vocabulary a failure is
# --------------------------------

_GLOBAL_PARTS = (
    ("grad_mode", "grad-mode"),
    ("autocast", "autocast"),
    ("default_dtype", "default-dtype"),
    ("deterministic_algorithms", "deterministic-algorithms"),
    ("num_threads", "num-threads"),
    ("allow_tf32", "matmul-precision"),
    ("allow_fp16_reduce", "matmul-precision"),
    ("allow_bf16_reduce", "matmul-precision"),
    ("fp32_precision", "matmul-precision"),
    ("cuda_matmul_precision", "matmul-precision"),
    ("torch_function", "torch-function"),
)
#: Whole-text markers, first match wins (checked on the guard's expression).
_CHECK_MARKERS = (
    ("Duplicate tensor", "tensor-aliasing"),
    ("_has_dynamo_dim_marking", "tensor-dynamic-marking"),
    ("not a subset", "tensor-dynamic-marking"),
    ("___check_metadata_", "tensor-subclass-metadata"),
    ("__dtensor_spec_", "tensor-dtensor-spec"),
    ("___check_opaque_guard_fn_", "opaque-object"),
    ("BACKEND_MATCH", "backend"),
    ("___check_current_backend(", "backend"),
    ("Cache line invalidated", "object-deallocated"),
    ("Unexpected recompilation", "unexpected"),
    ("getattr failed on source", "value-missing"),
    ("KeyError on ", "value-missing"),
    ("IndexError on ", "value-missing"),
    ("expected type of '", "tensor-type"),
    ("___is_grad_enabled()", "grad-mode"),
    ("___are_deterministic_algorithms_enabled()", "deterministic-algorithms"),
    ("___is_torch_function_enabled()", "torch-function"),
    ("___check_torch_function_mode_stack()", "torch-function-mode"),
    ("CURRENT_DEVICE", "default-device"),
    ("compare_functorch_state", "functorch-stack"),
    ("forward_ad._current_level", "dual-level"),
    ("top_saved_tensors_hooks", "saved-tensors-hooks"),
    ("___check_global_state()", "global-state"),
    ("___check_obj_id(", "object-identity"),
    ("___check_type_id(", "object-type"),
    ("___check_fake_script_type(", "object-type"),
    ("___tuple_iterator_len(", "iterator"),
    ("___normalize_range_iter(", "iterator"),
    ("___normalize_count_iter(", "iterator"),
    ("___list_reverseiterator_len(", "iterator"),
    ("___cow_tensor_matches(", "tensor-copy-on-write"),
    ("___get_current_stream(", "current-stream"),
    ("___key_to_id(", "dict-keys"),
    ("___dict_version(", "dict-version"),
    ("_dynamo_dynamic_indices", "tensor-dynamic-marking"),
    (".data_ptr() ==", "tensor-data-ptr"),
    ("set.__contains__(", "set-contains"),
    ("frozenset.__contains__(", "set-contains"),
    ("__math_isnan(", "nan-value"),
    ("__numpy_isnan(", "nan-value"),
)
_TENSOR_PARTS = {
    "size": "tensor-size",
    "stride": "tensor-stride",
    "dtype": "tensor-dtype",
    "requires_grad": "tensor-requires-grad",
    "rank": "tensor-rank",
}
_ZERO_ONE = frozenset({"0", "1"})
_SPECIALIZED_01 = "0/1 specialization"
_SIZE_01 = re.compile(
    r"^(?:2 <= \S+\.size\(\)\[\d+\]|\S+\.size\(\)\[\d+\] (?:>= 2|[=!]= [01])"
    r"|[01] [=!]= \S+\.size\(\)\[\d+\])$"
)
_SIZE_EQ = re.compile(r"^\S+\.size\(\)\[\d+\] == \d+$|^\d+ == \S+\.size\(\)\[\d+\]$")
_ALIAS = re.compile(r"^(?P<a>[^\s=<>!()]+) is (?P<b>[^\s=<>!()]+)$")
_MODULE_INT_HINT = "integer attributes of the nn.Module"
_CLOSURE_HINT = re.compile(r"HINT: guard on \"|__closure__|cell_contents")
_GLOBAL_SOURCE = re.compile(r"^(?:not )?\(?G\[")
_KEYS_LIST = re.compile(r"\.keys\(\)\)(?:\[\d+\])? ==")
_SET_LITERAL = re.compile(r"^\{[^:{}]+\}$")
_HOOKS = re.compile(r"\._(?:forward|backward|forward_pre|backward_pre|state_dict)\w*_hooks\b")


@functools.lru_cache(maxsize=4096)
def guard_check(text: str) -> str:
    """The name of diag.trace.guard_vocabulary's entry for one failure text
    (`tensor-dispatch-keys`,
    `module-attribute`, `grad-mode`, ...); "unknown" for a text of no known kind. Read off the
    raw text alone, so old traces classify as well as new ones."""
    try:
        return _check(_as_text(text))
    except Exception:  # a collector inside the user's program must never fail on odd text
        return "unknown"


def guard_entry(text: str) -> GuardCheck:
    """The vocabulary entry (meaning, fixes, which fixes are verified) for one failure text."""
    return vocabulary_entry(guard_check(text))


def _check(raw: str) -> str:
    line = raw.split("\n", 1)[0].strip()
    prefix = _COMPILE_ID.match(line)
    if prefix is not None:
        line = line[prefix.end() :]
    expr, comment = _split_comment(line)
    if not expr and prefix is not None:
        return "no-reason"
    hint = _HINT.search(expr)
    if hint is not None:  # " (HINT: ...)" after an expression without a comment
        comment, expr = expr[hint.start() :], expr[: hint.start()].rstrip()
    note = comment or ""
    if expr.startswith("tensor '"):
        return _tensor_check(expr)
    changed = _GLOBAL_CHANGED.match(expr)
    if changed is not None:
        return _global_part(changed.group("what"))
    for marker, name in _CHECK_MARKERS:
        if marker in expr:
            return name
    return _value_check(expr, note)


def _tensor_check(expr: str) -> str:
    kind, _, expected, actual = _tensor_mismatch(expr) or ("unknown", None, None, None)
    what = _TENSOR.match(expr)
    part = what.group("what").strip().lower() if what else ""
    if part == "size" and (expected in _ZERO_ONE or actual in _ZERO_ONE):
        return "tensor-size-0-1"
    if part in _TENSOR_PARTS:
        return _TENSOR_PARTS[part]
    if kind == "tensor-device":
        return "tensor-device"
    if part == "dispatch key set":
        return "tensor-dispatch-keys"
    return "unknown"


def _global_part(what: str) -> str:
    for word, name in _GLOBAL_PARTS:
        if what.strip().startswith(word):
            return name
    return "global-state"


def _value_check(expr: str, note: str) -> str:
    condition = expr.removeprefix("not ").strip()
    if _SPECIALIZED_01 in note or _SIZE_01.match(condition):
        return "tensor-size-0-1"
    prop = _SYM_PROP.search(condition)
    if prop is not None:
        if prop.group("offset"):
            return "tensor-storage-offset"
        if prop.group("prop") == "stride":
            return "tensor-stride"
        return "tensor-size" if _SIZE_EQ.match(condition) else "tensor-shape-relation"
    if _ISINSTANCE.match(expr) or _TYPE_IS.match(expr):
        return "object-type"
    if _HASATTR.match(expr) or ".__dict__)" in expr:
        return "object-hasattr"
    if _DICT_CONTAINS.match(expr) or _DICT_KEYS.match(expr) or _KEYS_LIST.search(expr):
        return "dict-keys"
    length = _LEN.match(condition)
    if length is not None or (expr.startswith("not ") and _SOURCE_LIKE.match(condition)):
        source = length.group("src") if length else condition
        return "module-hooks" if _HOOKS.search(source) else "container-length"
    none = _IS_NONE.match(condition)
    if none is not None and _SOURCE_LIKE.match(none.group("src")):
        return "none-value"
    alias = _ALIAS.match(condition)
    if alias is not None and all(_SOURCE_LIKE.match(alias.group(g)) for g in "ab"):
        return "tensor-aliasing"
    equals = _EQ.match(condition)
    if equals is not None and _SOURCE_LIKE.match(equals.group("src")):
        return _value_source(equals.group("src"), equals.group("value"), note)
    return "unknown"


def _value_source(source: str, value: str, note: str) -> str:
    """`x == 3`: what holds the value decides the kind, as the fixes differ."""
    if _GLOBAL_SOURCE.match(source) and not _CLOSURE_HINT.search(note):
        return "global-value"
    source = tree_key(source)  # torch 2.6 writes `L['x']`, later torch `x`
    if source.endswith(".training"):
        return "module-training"
    if source.endswith(".__name__"):
        return "object-identity"
    if _CLOSURE_HINT.search(source) or _CLOSURE_HINT.search(note):
        return "closure-value"
    if _GLOBAL_SOURCE.match(source):
        return "global-value"
    if value.strip() in ("True", "False"):
        return "bool-value"
    if _MODULE_INT_HINT in note or source.startswith(("self.", "L['self']", 'L["self"]')):
        return "module-attribute"
    if source.isidentifier() and _SET_LITERAL.match(value.strip()):
        return "set-contains"  # torch 2.6 compares a set argument whole: `L['s'] == {3}`
    if source.isidentifier() or re.match(r"^(?:int|float|str|bool)\(\w+\)$", source):
        return "argument-value"
    return "object-attribute"


# Dynamo names a module it reaches through a global as `G['__import_a_dot_b']` (or bare
# A TENSOR_MATCH guard of the tree: what the entry expects of one tensor. Dynamic dims are None.
_TREE_TENSOR = re.compile(
    r"^check_tensor\((?P<source>.+?), \w+, DispatchKeySet\([^)]*\), (?P<dtype>[\w.]+), "
    r"device=(?P<device>[^,]+), requires_grad=(?P<grad>\w+), size=\[(?P<size>[^\]]*)\], "
    r"stride=\[(?P<stride>[^\]]*)\]\)"
)
#: At most this many tensors per compile are kept.
MAX_TREE_TENSORS = 64


def guard_tree_tensors(tree: str) -> dict[str, dict[str, object]]:
    """Per tensor source of one compile's guard tree, what the entry expects of it:
    `{"dtype": "torch.float32", "device": "None", "size": [1, None, 24], "stride": [...]}`
    (None: a dynamic dimension). The newest entry was compiled for the call that recompiled,
    so its tensors are that call's: comparing an older entry's with them tells whether the older
    entry could have served the call (diag.evidence.causes). Sources as recompile reasons write
    them."""
    found: dict[str, dict[str, object]] = {}
    for line in tree.splitlines():
        match = _TREE_LINE.match(line)
        if match is None or match.group("name") != "TENSOR_MATCH":
            continue
        tensor = _TREE_TENSOR.match(match.group("rest"))
        if tensor is None:
            continue
        source = tree_key(tensor.group("source"))
        if source in found:
            continue
        found[source] = {
            "dtype": tensor.group("dtype"),
            "device": tensor.group("device").strip(),
            "requires_grad": tensor.group("grad") == "True",
            "size": _dims(tensor.group("size")),
            "stride": _dims(tensor.group("stride")),
        }
        if len(found) >= MAX_TREE_TENSORS:
            break
    return found


#: A value guard of the tree: `L['self'].step == 3` (EQUALS_MATCH) or an object's identity
#: (ID_MATCH, `___check_obj_id(L['fn'], 1403...)`).
_TREE_EQUALS = re.compile(r"^(?P<source>.+?) == (?P<value>.+?)(?:\s{2,}#.*)?$")
_TREE_IS_NONE = re.compile(r"^(?P<source>.+?) is None(?:\s{2,}#.*)?$")
#: Guards on one Python value: torch 2.13 writes True, False and None as their own kinds
#: (`TRUE_MATCH: L['self'].use_cfg == True`, `NONE_MATCH: ... is None`).
_VALUE_GUARDS = ("EQUALS_MATCH", "ID_MATCH", "TRUE_MATCH", "FALSE_MATCH", "NONE_MATCH")
_TREE_OBJ_ID = re.compile(r"^___check_obj_id\((?P<source>.+), (?P<id>-?\d+)\)")
#: At most this many value guards per compile are kept.
MAX_TREE_VALUES = 64


def guard_tree_values(tree: str) -> dict[str, str]:
    """Per source of one compile's guard tree, the Python value the entry was compiled for:
    `self.step` -> `3` (EQUALS_MATCH), `fn` -> `id 1403...` (ID_MATCH), `self.use_cfg` ->
    `False` (FALSE_MATCH; TRUE_MATCH and NONE_MATCH alike). Like guard_tree_tensors:
    the newest entry's are the recompiling call's, so an older entry expecting another value
    could not have served it (diag.evidence.causes)."""
    found: dict[str, str] = {}
    # Identities, submodules' values and the frame's own values are capped apart: a module's
    # tree checks the id of every builtin and the config of every submodule before the int
    # attribute it branches on (`self.num_steps == 6`), the value a recompile's cause is read from.
    kept = {"id": 0, "nested": 0, "own": 0}
    for line in tree.splitlines():
        match = _TREE_LINE.match(line)
        if match is None or match.group("name") not in _VALUE_GUARDS:
            continue
        rest = _split_comment(match.group("rest"))[0].strip()
        ident = _TREE_OBJ_ID.match(rest)
        equals = None if ident else _TREE_EQUALS.match(rest)
        is_none = None if ident or equals else _TREE_IS_NONE.match(rest)
        if ident is not None:
            source, value = ident.group("source"), f"id {ident.group('id')}"
        elif equals is not None:
            source, value = equals.group("source"), equals.group("value").strip()
        elif is_none is not None:
            source, value = is_none.group("source"), "None"
        else:
            continue
        key = tree_key(source)
        bucket = "id" if ident is not None else "nested" if "_modules" in key else "own"
        if key not in found and kept[bucket] < MAX_TREE_VALUES:
            found[key] = value[:200]
            kept[bucket] += 1
        if min(kept.values()) >= MAX_TREE_VALUES:
            break
    return found


def _dims(text: str) -> list[int | None]:
    values: list[int | None] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        values.append(parse_int(part, signed=True))
    return values


# `__import_a_dot_b`): torch/_dynamo/symbolic_convert.py import_source writes the module path with
# each "." as "_dot_". Shown as the program spells it: `a.b`.
_MANGLED_IMPORT = re.compile(
    r"""G\[(?P<q>['"])__import_(?P<quoted>\w+)(?P=q)\]|\b__import_(?P<bare>\w+)"""
)


def tree_key(source: str) -> str:
    """A guard's source as guard_tree_values and guard_tree_tensors key it: `G['ATTN_CONFIG']
    ['impl']` and `L['x']` without their frame dict (`ATTN_CONFIG['impl']`, `x`), module
    aliases as module paths; a failing guard's source compares with them through this."""
    return _TREE_ROOT.sub(lambda m: m.group("name"), readable_source(source.strip()))


def readable_source(text: str) -> str:
    """`G['__import_diag_dot_fixtures_dot_distributed'].STATE` -> `diag.fixtures.distributed.STATE`:
    a guard's source or condition with Dynamo's module aliases written as module paths."""
    if "__import_" not in text:
        return text
    return _MANGLED_IMPORT.sub(
        lambda m: (m.group("quoted") or m.group("bare")).replace("_dot_", "."), text
    )


_RAW_PREFIX = re.compile(r"^\s*(?:-\s+)?!?[\d/_]+:\s+")
_RAW_COMMENT = re.compile(r"\s{2,}#")


def condition_text(raw: str) -> str:
    """A failing guard's own condition, as reports quote it: the raw text without torch's
    compile-id prefix and without the source comment (and user stack) that follow it."""
    text = _RAW_COMMENT.split(_RAW_PREFIX.sub("", raw, count=1), maxsplit=1)[0].strip()
    return readable_source(text)


# --- what a guard's source is, in the program's terms ------------------------------------------

_DYNAMO_ROOT = re.compile(r"^[LG]\[(?P<q>['\"])(?P<name>[^'\"]+)(?P=q)\]")
_VIEW_BASE = "._base"
_ARGS_ITEM = re.compile(r"^args\[\d+\]$")
_STRIDE_EQ = re.compile(
    r"^(?P<t>.+?)\.stride\(\)\[(?P<i>\d+)\] == (?P<n>\d+)\*(?P=t)\.size\(\)\[(?P<j>\d+)\]$"
)


@dataclass(frozen=True)
class GuardSubject:
    """What a guard's source names: the value the program holds (`self.cos_sin`), who holds it
    (`self`, through the attribute `cos_sin`) and whether the guard is on the tensor that value
    is a view of (`._base`) rather than on the value itself."""

    source: str
    tensor: str
    owner: str | None
    attribute: str | None
    via_base: bool

    @property
    def is_argument(self) -> bool:
        """A value passed to the compiled call (`x`, `args[0]`), not one it reads off an object."""
        return self.owner is None


def guard_subject(source: str | None) -> GuardSubject | None:
    """Split `self.cos_sin._base` into owner `self`, attribute `cos_sin`, via a view's base.

    Dynamo writes locals as `L['x']` in some versions and plainly in others; both read alike.
    Sources that are not a dotted path (`len(x)`, `x[0].y` with calls) give None.
    """
    if not source:
        return None
    text = _DYNAMO_ROOT.sub(lambda m: m.group("name"), source.strip())
    via_base = text.endswith(_VIEW_BASE)
    tensor = text[: -len(_VIEW_BASE)] if via_base else text
    if not tensor or any(c in tensor for c in " ()"):
        return None
    owner, dot, attribute = tensor.rpartition(".")
    if not dot or not owner:
        return GuardSubject(source, tensor, None, None, via_base)
    return GuardSubject(source, tensor, owner, attribute, via_base)


def describe_subject(subject: GuardSubject, frame: str | None = None) -> str:
    """`self.cos_sin`: an attribute (`cos_sin`) of `self`, which block_runner reads; not one of
    its arguments. With `._base`: and a view, whose base tensor the guard checks."""
    where = f" {frame}" if frame else " the compiled frame"
    if subject.is_argument:
        what = (
            f"`{subject.tensor}`, an argument of{where}"
            if _ARGS_ITEM.match(subject.tensor) or frame
            else f"`{subject.tensor}`, a value{where} receives"
        )
    else:
        what = (
            f"`{subject.tensor}` is the attribute `{subject.attribute}` of `{subject.owner}` "
            f"that{where} reads, not an argument of the call"
        )
    if subject.via_base:
        what += (
            f"; it is a view (a reshape or slice of a bigger tensor), and Dynamo guards the "
            f"tensor it was cut from, `{subject.tensor}._base`"
        )
    return what


def explain_stride_guard(condition: str) -> str | None:
    """`t.stride()[0] == 64*t.size()[1]` in words: a contiguous tensor's dim-0 stride is its dim-1
    size times the sizes of the dims after it; Dynamo compiled that product as a constant, so
    dim 1 may vary but the later dims are fixed (for a table laid out [frames, height, width,
    channels]: width x channels), and a tensor with another size there fails the guard."""
    match = _STRIDE_EQ.match(condition.strip())
    if match is None:
        return None
    i, j, n = parse_int(match.group("i")), parse_int(match.group("j")), match.group("n")
    if i is None or j is None or j != i + 1:
        return None
    return (
        f"`{match.group('t')}` is contiguous, so its dim-{i} stride is its dim-{j} size times the "
        f"sizes of the dims after dim {j}; the guard compiled their product as the constant {n}: "
        f"dim {j} may vary, but dim {j + 1} and after are fixed (in a table laid out "
        f"[frames, height, width, channels], width x channels = {n}), so a tensor with other "
        f"sizes there recompiles"
    )


def mark_dynamic_hint(source: str | None, frame: str | None = None) -> str:
    """Where `torch._dynamo.mark_dynamic` has to go for a shape guard on `source`: on the
    argument before the call; on an attribute where it is assigned; for a view, on the tensor it
    is cut from, where that tensor is made (marking the view itself does not reach its base)."""
    subject = guard_subject(source)
    if subject is None:
        return "torch._dynamo.mark_dynamic(tensor, dim) on the tensor the guard names"
    t = subject.tensor
    if subject.via_base:
        where = (
            f"torch._dynamo.mark_dynamic(base, dim) on the tensor `{t}` is a view of "
            f"(`{t}._base`), where that tensor is created, before it is reshaped or sliced "
            f"into `{t}`"
        )
    elif subject.is_argument:
        return f"torch._dynamo.mark_dynamic({t}, dim) on the argument before the call"
    else:
        where = f"torch._dynamo.mark_dynamic({t}, dim) where `{t}` is assigned"
    if subject.owner is not None:
        where += (
            f" (`{subject.attribute}` of `{subject.owner}`, not an input of {frame or 'the call'})"
        )
    return where
