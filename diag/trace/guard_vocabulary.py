"""Every guard kind Dynamo can emit, in one table: what it means in the program's terms and the
fixes that remove the recompile (issue 35, "the guard vocabulary is torch's").

Standard library only, like diag.trace.guards, which decides a failure's check from this table:
the
compile collector runs inside the recorded program.

Read from torch 2.6, 2.7, 2.13, 2.14 and 2.15 (torch/_dynamo/guards.py: each `GuardBuilder`
method and `get_guard_fail_reason`; the leaf guards of `torch._C._dynamo.guards`, their messages in
libtorch_python and guards.cpp, `GlobalStateGuard`'s fields), and from the failure texts real
compiles of the guard-kind program wrote on each. `builders` names
what torch calls the check, so tests/unit/test_guard_vocabulary.py can fail on a builder, leaf
guard or global-state field of the installed torch that no entry names. docs/GUARDS.md is
rendered from this table (`python -m diag.trace.guard_vocabulary > docs/GUARDS.md`), and a test
keeps
the two in sync.

A fix's `verified_by` names the family of bench/fidelity_kit/guard_kinds.py that applies it to a
generated program and sees the live recompile go away with the output unchanged; None means the
fix is torch's advice or ours, not yet seen to work.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fix:
    text: str
    verified_by: str | None = None


@dataclass(frozen=True)
class GuardCheck:
    """One kind of guard: `name` is diag's, `family` the coarse diag.trace.guards.GuardKind
    analyzers
    group by, `builders` torch's names for it, `examples` failure texts as torch writes them."""

    name: str
    family: str
    title: str
    builders: tuple[str, ...]
    meaning: str
    fixes: tuple[Fix, ...]
    examples: tuple[str, ...] = ()

    @property
    def verified_fixes(self) -> tuple[Fix, ...]:
        return tuple(f for f in self.fixes if f.verified_by)

    def advice(self) -> str:
        """The fix sentence a finding prints for this kind: the verified fixes, or an honest
        "no verified fix" with the options (issue 35: every fix printed is one seen to work)."""
        verified = self.verified_fixes
        if verified:
            return "; or ".join(f.text for f in verified) + " (verified)"
        if self.fixes:
            options = "; ".join(f.text for f in self.fixes)
            return f"no verified fix for {self.title}; options: {options}"
        return f"no fix known for {self.title}"


_SAME_MODE = "Run warmup and serving under the same {what}"

VOCABULARY: tuple[GuardCheck, ...] = (
    # --- one tensor: TENSOR_MATCH's parts (C++ TensorCheck::check_verbose) ---------------------
    GuardCheck(
        "tensor-size",
        "tensor-size",
        "a static dimension changed size",
        ("TENSOR_MATCH", "TensorGuards"),
        "The entry was compiled for one size of this dimension (Dynamo treats sizes as static "
        "until a second size is seen; always under dynamic=False or "
        "torch._dynamo.config.automatic_dynamic_shapes = False, where warming up two sizes "
        "makes nothing dynamic) and the call brought another.",
        (
            Fix(
                "torch._dynamo.mark_dynamic(tensor, dim) on the tensor before the first call "
                "(never for a dimension that is 0 or 1 on some call)",
                "size",
            ),
            Fix("Warm up every size live traffic sends (a bounded set of resolutions)"),
            Fix(
                "Where the program set torch._dynamo.config.automatic_dynamic_shapes = False: "
                "leave it on, and warm up two sizes (the second compiles the dimension dynamic)",
                "setting_automatic_dynamic_off",
            ),
            Fix(
                "Where the program compiled with dynamic=False: leave dynamic unset, and warm up "
                "two sizes",
                "setting_dynamic_false",
            ),
            Fix("torch.compile(..., dynamic=True)"),
        ),
        ("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3",),
    ),
    GuardCheck(
        "tensor-size-0-1",
        "tensor-size",
        "a dimension became (or stopped being) 0 or 1",
        ("TENSOR_MATCH", "SHAPE_ENV", "SYMBOLIC_SHAPE_GUARD"),
        "Dynamo specialises sizes 0 and 1 even on a dynamic dimension: an entry compiled for "
        "size >= 2 fails on size 1 (`2 <= x.size()[0]`), and a static size 1 fails on 2. In a "
        "diffusion loop: a request without CFG's uncond pass halves a batch of 2 to 1.",
        (
            Fix("Warm up the size-1 (or size-0) call as well as the larger one", "size_0_1"),
            Fix(
                "torch._dynamo.decorators.mark_unbacked(tensor, dim): no 0/1 specialisation "
                "(the graph may not branch on that size)"
            ),
            Fix("Keep the dimension >= 2 (e.g. always batch cond and uncond)"),
        ),
        (
            "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 1",
            "0/1: 2 <= x.size()[0]  # return x * 2  # prog.py:18 in f (user code shown is first "
            "use of this value--the guard itself is not due user code but due to 0/1 "
            "specialization in the framework; to avoid specialization try "
            "torch._dynamo.decorators.mark_unbacked(tensor, dim))",
        ),
    ),
    GuardCheck(
        "tensor-shape-relation",
        "tensor-size",
        "a relation between dynamic sizes no longer holds",
        ("SHAPE_ENV", "SYMBOLIC_SHAPE_GUARD"),
        "The dynamic entry assumed a relation the traced code needed (a branch on a size, a "
        "view whose sizes must divide, two inputs of equal length) and the call breaks it.",
        (
            Fix("Warm up a call on each side of the relation", "shape_relation"),
            Fix(
                "Remove the branch on the size from the compiled code, or state it with "
                "torch._check so the graph does not depend on it"
            ),
        ),
        ("0/1: 5 <= x.size()[0]  # if x.shape[0] > 4:  # prog.py:9 in f",),
    ),
    GuardCheck(
        "tensor-stride",
        "tensor-stride",
        "a tensor's memory layout changed",
        ("TENSOR_MATCH", "TensorGuards", "SHAPE_ENV"),
        "The entry was compiled for one layout (contiguous, or a given transpose or slice) and "
        "the call passed a tensor laid out otherwise.",
        (
            Fix("Pass a contiguous tensor: .contiguous() before the call", "stride"),
            Fix("Mark the dimension the stride depends on dynamic (symbolic stride guards)"),
        ),
        (
            "0/0: tensor 'x' stride mismatch at index 0. expected 4, actual 1",
            "0/1: x.stride()[0] == 64*x.size()[1]",
        ),
    ),
    GuardCheck(
        "tensor-storage-offset",
        "tensor-other",
        "a view starts at another offset of its storage",
        ("SHAPE_ENV", "SYMBOLIC_SHAPE_GUARD"),
        "The tensor is a slice of a larger one, and the slice's start moved.",
        (Fix("Pass .contiguous() (or .clone()) of the slice"),),
        ("0/1: x.storage_offset() == 0",),
    ),
    GuardCheck(
        "tensor-rank",
        "tensor-other",
        "a tensor's number of dimensions changed",
        ("TENSOR_MATCH", "TensorGuards"),
        "The call passed a tensor with more or fewer dimensions; dynamic shapes cannot cover "
        "a change of rank.",
        (
            Fix("Warm up each rank the program sends", "rank"),
            Fix("Reshape to one rank before the call"),
        ),
        ("0/0: tensor 'x' rank mismatch. expected 2, actual 3",),
    ),
    GuardCheck(
        "tensor-dtype",
        "tensor-dtype",
        "a tensor's dtype changed",
        ("TENSOR_MATCH", "TensorGuards"),
        "The entry was compiled for one dtype and the call passed another (a float64 input, "
        "a half-precision request).",
        (
            Fix("Cast to the compiled dtype before the call (x.to(dtype))", "dtype"),
            Fix("Warm up each dtype the program serves"),
            Fix(
                "Where the program lowered torch._dynamo.config.recompile_limit and the frame "
                "hit it: raise the limit (or drop the setting), then warm up each dtype the "
                "program serves",
                "setting_recompile_limit_lowered",
            ),
        ),
        ("0/0: tensor 'x' dtype mismatch. expected Float, actual Double",),
    ),
    GuardCheck(
        "tensor-device",
        "tensor-device",
        "a tensor moved to another device",
        ("TENSOR_MATCH", "TensorGuards"),
        "The call passed a tensor on another device or device index (moving between backends "
        "shows as a dispatch-key change whose backend key differs).",
        (
            Fix("Move inputs to the compiled device before the call"),
            Fix("Warm up each device the program serves"),
        ),
        (
            "0/0: tensor 'x' Tensor device index mismatch. Expected device index to be 0, actual 1",
            "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, "
            "BackendSelect), actual DispatchKeySet(CUDA, BackendSelect)",
        ),
    ),
    GuardCheck(
        "tensor-requires-grad",
        "tensor-requires-grad",
        "a tensor's requires_grad changed",
        ("TENSOR_MATCH", "TensorGuards"),
        "The entry was compiled for a tensor that did (or did not) require grad; the call "
        "passed the other kind (a parameter, an output of a grad-enabled op).",
        (
            Fix("Pass .detach() of the tensor (or build it under no_grad)", "requires_grad"),
            Fix("Warm up with the same requires_grad as serving"),
        ),
        ("0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0",),
    ),
    GuardCheck(
        "tensor-dispatch-keys",
        "tensor-other",
        "a tensor carries other dispatch keys (inference tensor, functorch wrapper, ...)",
        ("TENSOR_MATCH", "TensorGuards", "DISPATCH_KEY_SET_MATCH"),
        "Same device, other dispatch keys: tensors made under torch.inference_mode() lack "
        "ADInplaceOrView and Autograd keys that tensors made under no_grad carry, so warmup "
        "under inference_mode and serving under no_grad (or the reverse) recompile; vmap/grad "
        "wrappers add FuncTorch keys; on torch 2.6, entering torch.autocast adds an Autocast "
        "key and shows here too.",
        (
            Fix(
                _SAME_MODE.format(what="mode: both torch.inference_mode() or both no_grad"),
                "dispatch_keys",
            ),
            Fix("Make inputs outside inference_mode (or .clone() them outside it)"),
        ),
        (
            "0/0: tensor 'temb' dispatch key set mismatch. expected DispatchKeySet(CPU, "
            "BackendSelect), actual DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, "
            "AutogradCPU)",
            "0/0: tensor 'L['w']' dispatch key set mismatch. expected DispatchKeySet(CPU, "
            "BackendSelect, ADInplaceOrView, AutogradCPU), actual DispatchKeySet(CPU, "
            "BackendSelect, ADInplaceOrView, AutogradCPU, AutocastCPU)",
        ),
    ),
    GuardCheck(
        "tensor-type",
        "type",
        "a tensor argument became another type",
        ("TENSOR_MATCH", "TensorGuards"),
        "The entry was compiled for a tensor (or a tensor subclass) and the call passed "
        "something else there (None, a Parameter, a subclass).",
        (
            Fix("Pass the same type on every call (a zero tensor instead of None)"),
            Fix("Warm up each variant (tensor and None)", "tensor_type"),
        ),
        ("0/0: expected type of 'b' to be a tensor type, ' but found <class 'NoneType'>",),
    ),
    GuardCheck(
        "tensor-aliasing",
        "tensor-other",
        "two inputs are (or stopped being) the same tensor",
        ("DUPLICATE_INPUT", "NO_TENSOR_ALIASING", "OBJECT_ALIASING"),
        "The entry was compiled for distinct tensors and the call passed one tensor twice (or "
        "the reverse); Dynamo compiles aliasing inputs separately.",
        (
            Fix("Pass a copy for the second argument (x.clone())", "aliasing"),
            Fix("Warm up the aliased call too"),
        ),
        ('0/0: Duplicate tensors found: ["x", "y"]', "0/0: L['y'] is L['x']"),
    ),
    GuardCheck(
        "tensor-storage-overlap",
        "tensor-other",
        "inputs' storages overlap differently",
        ("STORAGE_OVERLAPPING",),
        "Inputs that share storage (views of one buffer) overlap on this call where they did "
        "not when compiled, or the reverse.",
        (Fix("Pass non-overlapping copies (.clone()) of the views"),),
        (),
    ),
    GuardCheck(
        "tensor-dynamic-marking",
        "tensor-other",
        "a tensor's mark_dynamic marks changed",
        ("DIMENSION_DYNAMIC_MARKING_GUARD", "DYNAMIC_INDICES"),
        "The call's tensor carries mark_dynamic marks the entry was compiled without (or "
        "marks other dimensions).",
        (Fix("Mark the same dimensions on every call, from the first", "dynamic_marking"),),
        (
            "0/0: _has_dynamo_dim_marking is present on runtime tensor but was absent at "
            "compile time",
            "0/0: ((x._dynamo_dynamic_indices.issubset({0})) if hasattr(x, "
            "'_dynamo_dynamic_indices') else True)",
        ),
    ),
    GuardCheck(
        "tensor-data-ptr",
        "tensor-other",
        "another tensor's memory was passed where the entry expects one buffer",
        ("DATA_PTR_MATCH",),
        "The entry was bound to one tensor's memory (its data pointer): a new tensor in its "
        "place, even with equal values, fails (older torch, for tensors baked in as constants).",
        (Fix("Keep the same tensor object (update it in place with .copy_())"),),
        ("0/0: x.data_ptr() == 94250",),
    ),
    GuardCheck(
        "tensor-copy-on-write",
        "tensor-other",
        "a tensor is (or stopped being) a copy-on-write tensor",
        ("COW_TENSOR_MATCH",),
        "The entry was compiled for a plain tensor and the call passed a lazily cloned "
        "(copy-on-write) one, or the reverse (torch 2.15).",
        (Fix("Pass a materialised tensor (.clone()) in both cases"),),
        ("0/0: ___cow_tensor_matches(x, False)",),
    ),
    GuardCheck(
        "tensor-subclass-metadata",
        "tensor-other",
        "a tensor subclass's metadata changed",
        ("TENSOR_SUBCLASS_METADATA_MATCH",),
        "A traceable tensor subclass (quantized or sharded weights) reports other metadata "
        "(__tensor_flatten__'s context) than when compiled.",
        (Fix("Keep the subclass's metadata fixed after warmup, or warm up each variant"),),
        ("0/0: ___check_metadata_140230_c0/0(x)",),
    ),
    GuardCheck(
        "tensor-dtensor-spec",
        "tensor-other",
        "a DTensor's placement or mesh changed",
        ("DTENSOR_SPEC_MATCH",),
        "A DTensor input's placements, mesh or shape spec differs from when compiled.",
        (Fix("Keep the DTensor's placements fixed after warmup"),),
        ("0/0: __dtensor_spec_140230(x)",),
    ),
    # --- Python values ----------------------------------------------------------------------
    GuardCheck(
        "module-attribute",
        "python-value",
        "an attribute of an nn.Module changed value",
        ("EQUALS_MATCH", "CONSTANT_MATCH", "TRUE_MATCH", "FALSE_MATCH"),
        "Integer (and other plain) attributes of an nn.Module are static: each value is its "
        "own entry. A counter bumped every step (self.cnt), a setting set per request "
        "(self.num_steps) recompile on every new value.",
        (
            Fix(
                "torch._dynamo.config.allow_unspec_int_on_nn_module = True (ints only), set "
                "before the first compile",
                "module_int",
            ),
            Fix("Keep the value in a tensor buffer, or pass it as an argument of the call"),
        ),
        (
            "0/0: self.n == 1                                              # return self.lin(x)"
            " * self.n  # prog.py:35 in forward (HINT: torch.compile considers integer "
            "attributes of the nn.Module to be static. If you are observing recompilation, you"
            " might want to make this integer dynamic using "
            "torch._dynamo.config.allow_unspec_int_on_nn_module = True, or convert this "
            "integer into a tensor.)",
        ),
    ),
    GuardCheck(
        "module-training",
        "python-value",
        "a module switched between train() and eval()",
        ("EQUALS_MATCH", "TRUE_MATCH", "FALSE_MATCH", "NN_MODULE"),
        "The entry was compiled with module.training at one value; the call runs with the "
        "other (dropout and norms trace differently).",
        (Fix("Call model.eval() once, before warmup"),),
        ("0/0: self.training == True",),
    ),
    GuardCheck(
        "module-hooks",
        "container-length",
        "hooks were added to (or removed from) a module",
        ("EMPTY_NN_MODULE_HOOKS_DICT", "SEQUENCE_LENGTH", "DICT_LENGTH"),
        "Dynamo guards that a module's hook dicts stay as they were; registering a hook after "
        "warmup recompiles.",
        (Fix("Register hooks before the first compiled call"),),
        ("0/0: len(self._forward_hooks) == 0",),
    ),
    GuardCheck(
        "global-value",
        "python-value",
        "a global the compiled code reads changed",
        ("EQUALS_MATCH", "CONSTANT_MATCH", "TRUE_MATCH", "FALSE_MATCH", "NONE_MATCH"),
        "The compiled code read a module-level variable (G['NAME']) and compiled its value as "
        "a constant; assigning another value recompiles.",
        (Fix("Pass the value to the compiled call as a tensor argument", "global"),),
        ("0/0: G['SCALE'] == 1                              # return x * SCALE  # prog.py:4 in f",),
    ),
    GuardCheck(
        "closure-value",
        "python-value",
        "a variable captured by a closure changed",
        ("EQUALS_MATCH", "CONSTANT_MATCH", "CLOSURE_MATCH", "TRUE_MATCH", "FALSE_MATCH"),
        "The compiled function (or one it calls) reads a variable of an enclosing function; "
        "its value was compiled in, and a new value recompiles.",
        (
            Fix(
                "Pass the value to the compiled call as a tensor argument instead of capturing it",
                "closure",
            ),
        ),
        (
            "0/0: g.__closure__[0].cell_contents == 1   # return x * k  # prog.py:50 in inner "
            '(HINT: guard on "k")',
        ),
    ),
    GuardCheck(
        "object-attribute",
        "python-value",
        "an attribute of an object the code reads changed",
        ("EQUALS_MATCH", "CONSTANT_MATCH", "TRUE_MATCH", "FALSE_MATCH", "NONE_MATCH"),
        "The compiled code read a plain attribute of an object it was given (a config, a "
        "scheduler) and compiled its value in.",
        (Fix("Pass the value to the compiled call as a tensor argument", "object_attr"),),
        ("0/0: cfg.scale == 2                          # return x * cfg.scale  # p.py:3 in f",),
    ),
    GuardCheck(
        "argument-value",
        "python-value",
        "a Python argument (or local) changed value",
        ("EQUALS_MATCH", "CONSTANT_MATCH", "CONSTANT_SUBCLASS_MATCH"),
        "A Python number or string passed to the compiled call is a constant of the entry: "
        "strings and floats (unless specialize_float is off) on every value, ints until "
        "automatic dynamic makes them symbolic after the second value (never under "
        "dynamic=False or torch._dynamo.config.automatic_dynamic_shapes = False).",
        (
            Fix("Pass a number that varies per call as a tensor", "argument_float"),
            Fix("Warm up each value of a small set (e.g. a mode string)", "argument_str"),
        ),
        (
            "0/0: s == 0.5                                  # return x * s  # prog.py:12 in f",
            "0/0: L['guidance'] == 3.5",
        ),
    ),
    GuardCheck(
        "bool-value",
        "python-value",
        "a True/False flag flipped",
        ("BOOL_MATCH", "TRUE_MATCH", "FALSE_MATCH"),
        "The compiled code branches on a bool; each value is its own entry.",
        (
            Fix("Warm up both values of the flag", "bool"),
            Fix("Pass it as a tensor and use torch.where (or torch.cond)"),
        ),
        ("0/0: flag == True                     # return x * 2 if flag else x  # p.py:5 in f",),
    ),
    GuardCheck(
        "none-value",
        "python-value",
        "a value became (or stopped being) None",
        ("NONE_MATCH", "NOT_NONE_MATCH", "NOT_NONE"),
        "The compiled code took a path for None (an optional mask, a cache) and the call "
        "passed a value, or the reverse.",
        (Fix("Warm up both the None and the value case"),),
        ("0/0: mask is None",),
    ),
    GuardCheck(
        "nan-value",
        "python-value",
        "a float was (or stopped being) NaN",
        ("FLOAT_IS_NAN", "COMPLEX_IS_NAN"),
        "The entry was compiled for a NaN float argument.",
        (Fix("Pass the number as a tensor"),),
        ("0/0: (type(x) is float and __math_isnan(x))",),
    ),
    GuardCheck(
        "object-identity",
        "object-identity",
        "another object was passed where the entry expects one",
        (
            "ID_MATCH",
            "FUNCTION_MATCH",
            "CLASS_MATCH",
            "MODULE_MATCH",
            "BUILTIN_MATCH",
            "NN_MODULE",
            "NAME_MATCH",
            "PYMODULE_MATCH",
        ),
        "The entry is bound to one object (a function, a class, a module instance); the call "
        "passed another one (a function chosen per request, a model rebuilt per request). "
        "torch 2.6 and 2.7 guard True and False this way too (`___check_obj_id(flag, ...)`).",
        (
            Fix("Create the object once, before warmup, and pass that same object"),
            Fix("Warm up each object of a small set"),
        ),
        ("0/0: ___check_obj_id(fn, 1406162), type=<class 'builtin_function_or_method'>",),
    ),
    GuardCheck(
        "opaque-object",
        "object-identity",
        "an opaque object's own guard function failed",
        ("OPAQUE_OBJ_GUARD_FN_MATCH",),
        "An object registered as opaque to Dynamo (torch.library's opaque types) supplies its "
        "own guard function, and that function rejects this call's object.",
        (Fix("Pass an object the registered guard accepts (the same configuration)"),),
        ("0/0: ___check_opaque_guard_fn_1402_c0/0(obj)",),
    ),
    GuardCheck(
        "object-deallocated",
        "object-identity",
        "an object the entry was bound to was freed",
        ("WEAKREF_ALIVE", "OBJECT_MUTATION"),
        "The entry referred to an object (often a module) that has been garbage collected, or "
        "(older torch) a watched module that was mutated, so it can never match again.",
        (Fix("Keep the object alive for the program's life (hold a reference)"),),
        ("0/0: Cache line invalidated because L['self'] got deallocated",),
    ),
    GuardCheck(
        "object-type",
        "type",
        "a value of another type was passed",
        ("TYPE_MATCH", "FAKE_SCRIPT_TYPE_MATCH"),
        "The entry was compiled for one type (a list, a dataclass) and the call passed another "
        "(a tuple, a subclass).",
        (Fix("Pass one type on every call (e.g. always a list)", "type"),),
        ("0/0: ___check_type_id(a, 1406162), type=<class 'list'>  # a[0]  # p.py:6 in f",),
    ),
    GuardCheck(
        "object-hasattr",
        "container-keys",
        "an object gained (or lost) an attribute",
        ("HASATTR", "NO_HASATTR", "NOT_PRESENT_IN_GENERIC_DICT"),
        "The compiled code tested or read an attribute that exists on this call and not when "
        "compiled, or the reverse.",
        (Fix("Set every attribute in __init__, before warmup"),),
        ("0/0: hasattr(o, 'b')", "0/0: not ___dict_contains('b', o.__dict__)"),
    ),
    GuardCheck(
        "container-length",
        "container-length",
        "a list, tuple or dict changed length",
        ("SEQUENCE_LENGTH", "LENGTH_CHECK", "DICT_LENGTH", "TUPLE_ITERATOR_LEN"),
        "The compiled code iterated a container; each length is its own entry.",
        (
            Fix("Warm up each length the program sends", "length"),
            Fix("Pass a stacked tensor (or pad the list to one length)"),
        ),
        ("0/0: len(ts) == 2                        # return sum(ts)  # p.py:8 in f",),
    ),
    GuardCheck(
        "dict-keys",
        "container-keys",
        "a dict's keys (or their order) changed",
        (
            "DICT_KEYS",
            "DICT_CONST_KEYS",
            "DICT_KEYS_MATCH",
            "MAPPING_KEYS_CHECK",
            "MAPPING_KEYS_MATCH",
            "DICT_CONTAINS",
            "DICT_NOT_CONTAINS",
        ),
        "The compiled code read a dict's keys; the call's dict has other keys, in another "
        "order, or lacks one it read.",
        (Fix("Pass dicts with the same keys in the same order", "dict_keys"),),
        (
            "0/0: list(dict.keys(d)) == ['a', 'b']",
            "0/0: ___dict_contains('b', d)",
            "0/0: ___key_to_id(d) == ['a', 'b']",
            "0/0: list(L['d'].keys())[0] == 'a'",
        ),
    ),
    GuardCheck(
        "set-contains",
        "container-keys",
        "a set's members changed",
        ("SET_CONTAINS", "SET_NOT_CONTAINS"),
        "The compiled code tested membership in a set, and the set changed.",
        (Fix("Warm up each set of a small collection", "set"),),
        ("0/0: set.__contains__(s, 'a')", "0/0: L['skip_layers'] == {3}"),
    ),
    GuardCheck(
        "dict-version",
        "container-keys",
        "a dict the entry depends on was modified",
        ("DICT_VERSION",),
        "Dynamo guards some dicts (a module's or a global dict) on their version: any write "
        "to the dict after compiling recompiles.",
        (Fix("Stop writing to that dict between calls"),),
        ("0/0: ___dict_version(G['CONFIG']) == 1234",),
    ),
    GuardCheck(
        "iterator",
        "container-length",
        "an iterator's position or range changed",
        (
            "TUPLE_ITERATOR_LEN",
            "RANGE_ITERATOR_MATCH",
            "COUNT_ITERATOR_MATCH",
            "LIST_REVERSEITERATOR_LEN",
        ),
        "An iterator was passed into the compiled code; its remaining length, range or count "
        "differs.",
        (Fix("Pass the values (a list or tensor) instead of an iterator"),),
        ("0/0: ___tuple_iterator_len(it) == 3", "0/0: ___normalize_range_iter(r) == (0, 4, 1)"),
    ),
    # --- global state: GLOBAL_STATE's parts (C++ GlobalStateGuard) and its siblings --------------
    GuardCheck(
        "grad-mode",
        "global-state",
        "grad mode differs (torch.no_grad / enable_grad)",
        ("GLOBAL_STATE", "GRAD_MODE", "grad_mode"),
        "The entry was compiled with grad mode on (or off) and the call runs with the other.",
        (Fix(_SAME_MODE.format(what="grad mode (both inside torch.no_grad())"), "grad_mode"),),
        ("0/0: GLOBAL_STATE changed: grad_mode ", "0/0: ___is_grad_enabled()"),
    ),
    GuardCheck(
        "autocast",
        "global-state",
        "autocast differs (enabled, dtype, cache)",
        ("GLOBAL_STATE", "autocast_state", "autocast_cache_enabled"),
        "The entry was compiled inside (or outside) torch.autocast, or with another autocast "
        "dtype, and the call runs otherwise.",
        (Fix(_SAME_MODE.format(what="torch.autocast context"), "autocast"),),
        (
            "0/0: GLOBAL_STATE changed: autocast(cpu)_enabled ",
            "0/0: GLOBAL_STATE changed: autocast(cuda)_dtype ",
        ),
    ),
    GuardCheck(
        "default-dtype",
        "global-state",
        "torch's default dtype differs",
        ("GLOBAL_STATE", "default_dtype"),
        "torch.set_default_dtype changed between compiling and this call (new tensors would "
        "be made in another dtype).",
        (Fix("Set the default dtype once, before warmup", "default_dtype"),),
        ("0/0: GLOBAL_STATE changed: default_dtype ",),
    ),
    GuardCheck(
        "deterministic-algorithms",
        "global-state",
        "torch.use_deterministic_algorithms differs",
        (
            "GLOBAL_STATE",
            "DETERMINISTIC_ALGORITHMS",
            "deterministic_algorithms",
            "deterministic_algorithms_warn_only",
        ),
        "Deterministic algorithms were switched on (or off, or to warn-only) after compiling.",
        (Fix("Set use_deterministic_algorithms once, before warmup", "deterministic"),),
        ("0/0: GLOBAL_STATE changed: deterministic_algorithms ",),
    ),
    GuardCheck(
        "num-threads",
        "global-state",
        "torch's intra-op thread count differs",
        ("GLOBAL_STATE", "num_threads"),
        "torch.set_num_threads changed between compiling and this call.",
        (Fix("Set the thread count once, before warmup", "num_threads"),),
        ("0/0: GLOBAL_STATE changed: num_threads ",),
    ),
    GuardCheck(
        "matmul-precision",
        "global-state",
        "a matmul precision flag differs (TF32, reduced-precision reductions)",
        (
            "GLOBAL_STATE",
            "allow_tf32",
            "cuda_matmul_precision",
            "allow_fp16_reduce",
            "allow_bf16_reduce",
        ),
        "torch.backends.cuda.matmul.allow_tf32 / allow_fp16_reduced_precision_reduction / "
        "allow_bf16_reduced_precision_reduction (or set_float32_matmul_precision) changed "
        "after compiling.",
        (Fix("Set matmul precision once, before warmup", "matmul_precision"),),
        (
            "0/0: GLOBAL_STATE changed: allow_tf32 ",
            "0/0: GLOBAL_STATE changed: cuda_matmul_precision ",
        ),
    ),
    GuardCheck(
        "torch-function",
        "global-state",
        "torch-function handling was disabled or enabled",
        ("GLOBAL_STATE", "torch_function", "torch_function_all_disabled"),
        "The call runs under torch._C.DisableTorchFunction (or DisableTorchFunctionSubclass) "
        "where the entry was compiled without it, or the reverse.",
        (Fix(_SAME_MODE.format(what="torch-function state")),),
        ("0/0: GLOBAL_STATE changed: torch_function ",),
    ),
    GuardCheck(
        "torch-function-mode",
        "global-state",
        "the stack of TorchFunctionModes differs (including `with torch.device(...)`)",
        ("TORCH_FUNCTION_STATE", "TORCH_FUNCTION_MODE_STACK"),
        "A TorchFunctionMode is active on this call and was not when compiled (or the "
        "reverse); `with torch.device(...)` and torch.set_default_device are such modes.",
        (
            Fix(
                _SAME_MODE.format(what="modes (the same `with torch.device(...)`)"),
                "torch_function_mode",
            ),
        ),
        ("0/0: ___check_torch_function_mode_stack()",),
    ),
    GuardCheck(
        "default-device",
        "global-state",
        "the default device differs",
        ("DEFAULT_DEVICE",),
        "torch.set_default_device (torch.utils._device.CURRENT_DEVICE) changed after compiling.",
        (Fix("Set the default device once, before warmup"),),
        ("0/0: utils_device.CURRENT_DEVICE == None",),
    ),
    GuardCheck(
        "current-stream",
        "global-state",
        "a stream argument is (or stopped being) the current stream",
        ("CURRENT_STREAM_MATCH",),
        "The compiled code was given a stream that was the current stream when compiled and is "
        "not now, or the reverse (torch 2.15).",
        (Fix("Call the compiled code under the same current stream it was warmed up under"),),
        ("0/0: s == ___get_current_stream(torch.device('cuda'))",),
    ),
    GuardCheck(
        "functorch-stack",
        "global-state",
        "the functorch transform stack differs (vmap, grad, jvp)",
        ("FUNCTORCH_STACK_MATCH",),
        "The compiled function is called inside a different torch.func transform than when "
        "compiled.",
        (Fix("Call it under the same transforms every time"),),
        ("0/0: torch._functorch.pyfunctorch.compare_functorch_state([])",),
    ),
    GuardCheck(
        "dual-level",
        "global-state",
        "the forward-AD level differs",
        ("DUAL_LEVEL", "DUAL_LEVEL_MATCH"),
        "The call runs inside (or outside) torch.autograd.forward_ad.dual_level() unlike "
        "when compiled.",
        (Fix("Call it under the same forward-AD level every time"),),
        ("0/0: torch.autograd.forward_ad._current_level == -1",),
    ),
    GuardCheck(
        "saved-tensors-hooks",
        "global-state",
        "autograd saved-tensors hooks differ",
        ("AUTOGRAD_SAVED_TENSORS_HOOKS",),
        "torch.autograd.graph.saved_tensors_hooks (activation offloading or checkpointing) "
        "differ from when compiled.",
        (Fix("Enter the same saved_tensors_hooks for every call"),),
        ("0/0: torch._functorch.aot_autograd.utils.top_saved_tensors_hooks ids == None",),
    ),
    GuardCheck(
        "fsdp-training-state",
        "global-state",
        "FSDP's training state differs",
        ("FSDP_TRAINING_STATE",),
        "FSDP2's training state (forward, pre-backward, ...) differs from when compiled.",
        (Fix("Compile the module in one FSDP state only"),),
        (),
    ),
    GuardCheck(
        "global-state",
        "global-state",
        "torch's global state differs (part not named)",
        ("GLOBAL_STATE", "GlobalStateGuard"),
        "Some part of torch's global state the entry was compiled under changed; torch did "
        "not say which.",
        (Fix(_SAME_MODE.format(what="global settings")),),
        ("0/0: ___check_global_state() against {}",),
    ),
    # --- the compile itself -------------------------------------------------------------------
    GuardCheck(
        "backend",
        "object-identity",
        "the code was compiled with another backend object",
        ("BACKEND_MATCH",),
        "torch.compile was called again (a new backend callable, e.g. per request); entries of "
        "the old one never match the new one, so each new torch.compile recompiles.",
        (Fix("Call torch.compile once and reuse the compiled callable", "backend"),),
        (
            "0/0: BACKEND_MATCH failure: torch.compile detected different backend callables. "
            "Cached backend: f (id=0x1). New backend: f (id=0x2). If this is unexpected, wrap "
            "your backend in functools.partial (or reuse the same cached backend) to avoid "
            "creating a new backend function each time.",
        ),
    ),
    GuardCheck(
        "no-reason",
        "object-identity",
        "every guard passed: torch recorded no reason",
        (),
        "The entry's guards all pass on the call, yet Dynamo compiled again, and torch wrote an "
        "empty reason (`0/0: `). torch 2.6 and 2.7 do this when the compile's backend differs "
        "(torch.compile called again: a new backend callable), which it checks apart from the "
        "guards; later torch writes a BACKEND_MATCH text instead.",
        (Fix("Call torch.compile once and reuse the compiled callable"),),
        ("0/0: ",),
    ),
    GuardCheck(
        "python-check",
        "unknown",
        "a check written in Python (its text names what it tests)",
        ("LAMBDA_GUARD",),
        "Dynamo checks this condition with a Python function; the condition text is all torch "
        "records.",
        (),
        (),
    ),
    GuardCheck(
        "value-missing",
        "container-keys",
        "a value the guards read is missing",
        ("GetAttrGuardAccessor", "DictGetItemGuardAccessor", "GetItemGuardAccessor"),
        "The guard could not reach the value it checks: an attribute, key or index the "
        "compiled code read is gone on this call.",
        (Fix("Keep the structure the compiled code reads (attributes, keys) fixed"),),
        ("0/0: getattr failed on source L['self'].cache", "0/0: KeyError on L['d']['a']"),
    ),
    GuardCheck(
        "unexpected",
        "unknown",
        "torch could not say which guard failed",
        (),
        "The runtime guards failed but passed again when torch looked for the reason: the call "
        "fit an entry, and something changed between the two checks; torch asks for a bug "
        "report. Seen in a pipeline served from two threads, when another thread compiled "
        "during the call's step: live-compile then names that compile.",
        (),
        (
            "0/0: Unexpected recompilation: runtime guards failed even though they passed "
            "during recompilation-reason analysis.",
        ),
    ),
    GuardCheck(
        "unknown",
        "unknown",
        "a guard diag does not know",
        (),
        "A guard text diag cannot classify (a torch newer than its table); the raw text is quoted.",
        (),
        (),
    ),
)

BY_NAME: dict[str, GuardCheck] = {c.name: c for c in VOCABULARY}

#: Names torch uses for its own plumbing, not checks of the program's values: the guard-manager
#: base classes and accessors (accessors are covered by "value-missing" when they fail).
NOT_CHECKS = frozenset({"LeafGuard", "RelationalGuard", "SHAPE_ENV"})


def entry(name: str) -> GuardCheck:
    """The table's entry for a check name (an unknown name gives the "unknown" entry)."""
    return BY_NAME.get(name, BY_NAME["unknown"])


def builders() -> frozenset[str]:
    """Every torch name some entry claims."""
    return frozenset(b for c in VOCABULARY for b in c.builders)


def render_markdown() -> str:
    """docs/GUARDS.md, from the table."""
    intro = (
        "Every guard kind Dynamo can emit, as diag classifies it: what it means in the "
        "program's terms and the fixes. Generated from `diag/trace/guard_vocabulary.py` by "
        "`python -m diag.trace.guard_vocabulary > docs/GUARDS.md`; "
        "tests/unit/test_guard_vocabulary.py "
        "fails when this file and the table differ, and when the installed torch has a guard "
        "builder, C++ leaf guard or GLOBAL_STATE field that no entry names (checked on torch "
        "2.15, 2.14, 2.13, 2.7 and 2.6; 2.8 to 2.12 were not at hand). A fix marked *verified* is "
        "applied by a guard-kind family of `bench/fidelity.py --guard-kinds` "
        "(bench/fidelity_kit/guard_kinds.py) to a generated program, which then serves without "
        "the live recompile and with the same outputs (on torch 2.13, CPU, aot_eager); the "
        "others are not yet seen to work."
    )
    lines = [
        "# Guard kinds",
        "",
        intro,
        "",
        "| kind | family | torch's names | verified fixes |",
        "|---|---|---|---|",
    ]
    for c in VOCABULARY:
        verified = len(c.verified_fixes)
        lines.append(
            f"| [{c.name}](#{c.name}) | {c.family} | {', '.join(c.builders) or '-'} | "
            f"{verified}/{len(c.fixes)} |"
        )
    for c in VOCABULARY:
        lines += ["", f"## {c.name}", "", f"**{c.title}.** {c.meaning}", ""]
        if c.fixes:
            lines.append("Fixes:")
            lines.append("")
            for fix in c.fixes:
                mark = (
                    f" *(verified: guard-kind family `{fix.verified_by}`)*"
                    if fix.verified_by
                    else " *(not verified)*"
                )
                lines.append(f"- {fix.text}{mark}")
        else:
            lines.append("No fix: diag quotes torch's text and says it has no verified fix.")
        if c.examples:
            lines += ["", "As torch writes it:", ""]
            lines += [f"    {e}" for e in c.examples]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
