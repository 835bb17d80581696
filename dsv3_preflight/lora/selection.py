"""Which LoRA layer peft builds for each saved module, read from adapter_config.json as peft 0.21 reads it (pure).

peft builds two kinds of LoRA layer when it loads an adapter:

- a module LoRA for each module key that ``check_target_module_exists`` selects. exclude_modules come first (a
  regex fully matching the key, or a list entry equal to the key or ending it after a dot), then modules_to_save
  (never a target), then target_modules: a regex fully matching the key, a name equal to the key (no layer
  filter), or a name ending the key after a dot, kept only in the layers of layers_to_transform (the layer
  number found by layers_pattern, or the first numbered part of the key);
- a ``ParamWrapper`` for each parameter that ``target_parameters`` names (``_inject_parameters``): an entry is
  ``<module path suffix>.<parameter>``, or a bare ``<parameter>`` that any module's parameter of that name
  matches. peft's transformers-5 conversion writes DeepSeek-V3's MLP and router targets this way
  (``gate_up_proj``, ``down_proj``, ``gate.weight``). Neither exclude_modules nor layers_to_transform applies
  to them. Several parameters of one module nest in the order the module registers them: the wrapper of the last
  one sits at the module's path, each earlier one a ``.base_layer`` deeper (``mlp.experts`` wraps down_proj and
  ``mlp.experts.base_layer`` gate_up_proj). A wrapper's lora_A has r x E rows: E is the parameter's first
  dimension (the experts) for a 3-D parameter, 1 for a 2-D one, and r is the rank_pattern entry matching
  ``<module>.<parameter>``, else r.

Without the model, a bare parameter name could belong to any module. A saved module is read as its wrapper
when a dotted entry pins the module, or when its rank shows E of at least 2 (a parameter stacked over
experts). A plain Linear that target_modules does not select has E of 1, so it is not read as a wrapper.
Which parameters a module has, and E for a module with one wrapper, only the model knows.
tests/lora/test_lora_peft_params.py holds :func:`select_module` to peft's ``check_target_module_exists``,
:func:`reachable` to the parameters peft wraps, and the verdicts to ``PeftModel.from_pretrained``.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any

from . import patterns
from .case import CONFIG_NAME
from .layout import layer_index, template

TARGETED, EXCLUDED, UNMATCHED, OTHER_LAYER, WRAPPER = "targeted", "excluded", "unmatched", "other_layer", "wrapper"
ALL_LINEAR = "all-linear"
BASE_LAYER = "base_layer"
#: more names than this reaching one module: each wrapper's rank is checked alone, not the assignment
MAX_ASSIGN = 8


def _strings(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, (list, dict)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


@dataclass(frozen=True)
class Targets:
    """The fields of adapter_config.json peft selects with, each as peft reads it (malformed ones left out:
    the config rules report them)."""

    modules: str | tuple[str, ...] | None
    parameters: tuple[str, ...] = ()
    exclude: str | tuple[str, ...] | None = None
    modules_to_save: tuple[str, ...] = ()
    layers: frozenset[int] | None = None
    layers_pattern: tuple[str, ...] = ()
    r: int | None = None
    rank_pattern: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Targets | None:
        """None when target_modules is neither a regex nor a list of names and no target_parameters stand in."""
        tm, tp = config.get("target_modules"), config.get("target_parameters")
        params = _strings(tp) if isinstance(tp, list) else None
        modules = tm if isinstance(tm, str) else _strings(tm)
        if modules is None and (tm is not None or not params):
            return None
        ex = config.get("exclude_modules")
        ltt = config.get("layers_to_transform")
        if type(ltt) is int:
            layers = frozenset({ltt})
        elif isinstance(ltt, list) and ltt and all(type(i) is int for i in ltt):
            layers = frozenset(ltt)
        else:
            layers = None  # None, [] (peft: no filter) or malformed (the config rule says so)
        lp = config.get("layers_pattern")
        pattern = (lp,) if isinstance(lp, str) and lp else (_strings(lp) or ()) if isinstance(lp, list) else ()
        mts = config.get("modules_to_save")
        return cls(modules=modules, parameters=params or (),
                   exclude=ex if isinstance(ex, str) and ex else (_strings(ex) or None) if ex else None,
                   modules_to_save=(_strings(mts) or ()) if isinstance(mts, list) else (), layers=layers,
                   layers_pattern=pattern, **cls._ranks(config))

    @classmethod
    def of_ranks(cls, config: Mapping[str, Any]) -> Targets:
        """Only r and rank_pattern (when target_modules is malformed: the ranks are still judged)."""
        return cls(modules=None, **cls._ranks(config))

    @staticmethod
    def _ranks(config: Mapping[str, Any]) -> dict[str, Any]:
        r, rp = config.get("r"), config.get("rank_pattern")
        return {"r": r if type(r) is int and r > 0 else None,
                "rank_pattern": tuple(rp.items()) if isinstance(rp, dict) else ()}

    def rank_for(self, key: str) -> int | None:
        """The rank peft gives the layer it builds for ``key`` (a module, or ``<module>.<parameter>``)."""
        if self.rank_pattern:
            found = patterns.pattern_key([k for k, _ in self.rank_pattern], key)
            if found is not None:
                value = dict(self.rank_pattern)[found]
                return value if type(value) is int and value > 0 else None
        return self.r


# ------------------------------------------------------------------------------------------ module LoRA
def excluded(t: Targets, key: str) -> bool:
    """exclude_modules or modules_to_save keep peft from adapting ``key``."""
    if isinstance(t.exclude, str):
        if patterns.fullmatch_any(t.exclude, [key]):
            return True
    elif t.exclude and (key in t.exclude or any(key.endswith("." + e) for e in t.exclude)):
        return True
    return any(patterns.saved_module_match(m, key) for m in t.modules_to_save)


def _layer_of(t: Targets, key: str) -> int | None:
    if not t.layers_pattern:
        return layer_index(key)
    for p in t.layers_pattern:
        idx = patterns.layer_index(p, key)
        if idx is not None:
            return idx
    return None


def select_module(t: Targets, key: str) -> str:
    """What peft's check_target_module_exists says of module ``key``: TARGETED, EXCLUDED, UNMATCHED, or
    OTHER_LAYER (a target name ends it, but layers_to_transform leaves its layer out). Raises PatternError."""
    if excluded(t, key):
        return EXCLUDED
    if t.modules is None:
        return UNMATCHED
    if isinstance(t.modules, str):
        if t.modules == ALL_LINEAR:
            return TARGETED  # every Linear: which modules are Linear only the model knows
        return TARGETED if patterns.fullmatch_any(t.modules, [key]) else UNMATCHED
    if key in t.modules:
        return TARGETED  # a name equal to the key: peft returns before the layer filter
    if not any(key.endswith("." + m) for m in t.modules):
        return UNMATCHED
    if t.layers is None:
        return TARGETED
    return TARGETED if _layer_of(t, key) in t.layers else OTHER_LAYER


def fully_excluded(t: Targets, name: str, parents: Iterable[str]) -> bool:
    """exclude_modules or modules_to_save leave out target name ``name`` wherever it would adapt a module: it adapts
    nothing on purpose. A list entry equal to the name or ending it excludes it everywhere; otherwise the keys peft
    would find (``<parent>.<name>``, for the ``parents`` of the adapted modules, by their template) must be excluded
    in every layer of one template and in no layer of any other (a name left in some layers is a layer untrained)."""
    if not isinstance(t.exclude, str) and t.exclude and any(name == e or name.endswith("." + e) for e in t.exclude):
        return True
    groups: dict[str, list[bool]] = {}
    for parent in parents:
        groups.setdefault(template(parent), []).append(excluded(t, f"{parent}.{name}"))
    verdicts = {all(g) if any(g) else None for g in groups.values()} - {None}
    return verdicts == {True} or excluded(t, name)


# ------------------------------------------------------------------------------------------ parameter wrappers
def unwrap(module: str) -> tuple[str, int]:
    """(the module a saved path wraps, how many ``.base_layer`` deep the path is)."""
    depth = 0
    while module.endswith("." + BASE_LAYER):
        module = module[: -len(BASE_LAYER) - 1]
        depth += 1
    return module, depth


def reachable(t: Targets, module: str) -> list[tuple[str, bool]]:
    """[(parameter, pinned)]: the parameters of ``module`` target_parameters may name, sorted; pinned when an entry
    names the module too (``<suffix of module>.<parameter>``), not only the parameter."""
    names: dict[str, bool] = {}
    for entry in t.parameters:
        owner, _, param = entry.rpartition(".")
        if not param:
            continue
        if not owner:
            names.setdefault(param, False)
        elif module == owner or module.endswith("." + owner):
            names[param] = True
    return sorted(names.items())


def _rank(pair: Mapping[str, tuple[int, ...]]) -> int | None:
    a, b = pair.get("A"), pair.get("B")
    if a is not None and len(a) >= 2 and a[0]:
        return a[0]
    if b is not None and len(b) >= 2 and b[1]:
        return b[1]
    return None


def _experts(got: int | None, want: int | None, pinned: bool) -> int | None:
    """E for a wrapper of rank ``got`` around a parameter of rank ``want``: 0 when it cannot be one, None unknown."""
    if got is None or want is None:
        return None
    if got % want:
        return 0
    e = got // want
    return e if e >= (1 if pinned else 2) else 0


def rank_fits(t: Targets, module: str, ranks: list[int | None]) -> bool:
    """The saved wrappers of ``module`` (ranks by depth, None where unknown) take the ranks of distinct reachable
    parameters, each r x E with one E (the experts) for all of them."""
    names = [(p, pinned, t.rank_for(f"{module}.{p}")) for p, pinned in reachable(t, module)]
    if len(ranks) > len(names):
        return False
    if len(names) > MAX_ASSIGN:
        return all(any(_experts(g, w, pin) != 0 for _, pin, w in names) for g in ranks)
    for chosen in permutations(names, len(ranks)):
        es = {_experts(g, w, pin) for g, (_, pin, w) in zip(ranks, chosen)} - {None}
        if 0 not in es and len(es) <= 1:
            return True
    return False


@dataclass
class Selection:
    """What peft builds for each saved module, and the parameter wrappers by the module they wrap."""

    kind: dict[str, str] = field(default_factory=dict)
    #: wrapped module -> {depth: saved path}
    wrappers: dict[str, dict[int, str]] = field(default_factory=dict)

    def modules(self, *kinds: str) -> list[str]:
        return sorted(m for m, k in self.kind.items() if k in kinds)


def classify(t: Targets, pairs: Mapping[str, Mapping[str, tuple[int, ...]]]) -> Selection:
    """The kind of each saved module: TARGETED and WRAPPER are what peft builds and loads; EXCLUDED, UNMATCHED
    and OTHER_LAYER it drops. Raises PatternError (an invalid or catastrophic regex: the config rules report it)."""
    out = Selection()
    candidates: dict[str, dict[int, str]] = {}
    for module in sorted(pairs):
        base, depth = unwrap(module)
        kind = select_module(t, module) if depth == 0 else UNMATCHED
        out.kind[module] = kind
        if (kind != TARGETED or t.modules == ALL_LINEAR) and t.parameters and reachable(t, base):
            candidates.setdefault(base, {})[depth] = module
    for base, saved in candidates.items():
        names = reachable(t, base)
        pinned = any(p for _, p in names)
        for depth, module in saved.items():
            if depth >= len(names):
                continue  # peft nests one wrapper per parameter it finds
            got = _rank(pairs[module])
            if not pinned and got is not None and all(_experts(got, t.rank_for(f"{base}.{p}"), False) == 0
                                                      for p, _ in names):
                continue  # a bare name, and the rank of a 2-D module: no parameter stacked over experts
            out.kind[module] = WRAPPER
            out.wrappers.setdefault(base, {})[depth] = module
    return out


def wrapper_rank_problems(t: Targets, sel: Selection, pairs: Mapping[str, Mapping[str, tuple[int, ...]]]
                          ) -> list[str]:
    """The wrapped modules whose saved wrappers' ranks no assignment of reachable parameters explains."""
    bad = []
    for base, saved in sorted(sel.wrappers.items()):
        ranks = [_rank(pairs[saved[d]]) if d in saved else None for d in range(max(saved) + 1)]
        if rank_fits(t, base, ranks):
            continue
        wants = ", ".join(f"{p} r={t.rank_for(f'{base}.{p}')}" for p, _ in reachable(t, base))
        got = ", ".join("?" if g is None else str(g) for g in ranks)
        bad.append(f"{base} (its {len(ranks)} wrappers have r={got}, outermost first; each must be one number of "
                   f"experts times one of {wants})")
    return bad


def parameter_coverage(t: Targets, sel: Selection) -> list[str]:
    """Clauses naming the target_parameters entries no saved wrapper holds: an entry naming a module no wrapper is
    at, and more parameter names than the saved wrappers can hold (each holds one)."""
    if not t.parameters:
        return []
    holds: dict[str, int] = {}
    pinned: dict[str, set[str]] = {}
    for base, saved in sel.wrappers.items():
        tmpl = template(base)
        holds[tmpl] = max(holds.get(tmpl, 0), len(saved))
        pinned.setdefault(tmpl, set()).update(p for p, pin in reachable(t, base) if pin)
    clauses = []
    unheld = [e for e in t.parameters if "." in e
              and not any(b == e.rpartition(".")[0] or b.endswith("." + e.rpartition(".")[0]) for b in sel.wrappers)]
    if unheld:
        clauses.append(f"{', '.join(unheld)} {'is' if len(unheld) == 1 else 'are'} held by no saved key")
    for tmpl, names in sorted(pinned.items()):
        if len(names) > holds[tmpl]:
            clauses.append(f"{', '.join(sorted(names))} name {len(names)} parameters of {tmpl}, which holds LoRA "
                           f"weights for {holds[tmpl]}")
    bare = sorted({e for e in t.parameters if e and "." not in e} - set().union(set(), *pinned.values()))
    spare = sum(max(0, n - len(pinned.get(tmpl, ()))) for tmpl, n in holds.items())
    if len(bare) > spare:
        listed = ", ".join(bare)
        clauses.append(f"{listed} name {len(bare)} parameters without their module, and the saved wrappers hold {spare}"
                       if spare else f"{listed} {'is' if len(bare) == 1 else 'are'} held by no saved key")
    return clauses


def rank_problems(pairs: Mapping[str, Mapping[str, tuple[int, ...]]], config: Mapping[str, Any],
                  built: tuple[Targets, Selection] | None) -> list[str] | None:
    """Saved modules whose ranks disagree (lora_A with lora_B, or with the config); None when a pattern is invalid.

    A module LoRA has the rank_pattern entry peft picks for its path, else r; the wrappers of target_parameters are
    held to the ranks of the parameters they can wrap (:func:`wrapper_rank_problems`)."""
    t = built[0] if built else Targets.of_ranks(config)
    kinds = built[1].kind if built else {}
    bad: list[str] = []
    try:
        for module, pair in sorted(pairs.items()):
            a, b = pair.get("A"), pair.get("B")
            ra = a[0] if a is not None and len(a) >= 2 else None
            rb = b[1] if b is not None and len(b) >= 2 else None
            if ra is not None and rb is not None and ra != rb:
                bad.append(f"{module} (lora_A r={ra}, lora_B r={rb})")
                continue
            got = ra if ra is not None else rb
            if got is None or not config or kinds.get(module) == WRAPPER:
                continue
            want = t.rank_for(module)
            if want is not None and got != want:
                bad.append(f"{module} (r={got}, {CONFIG_NAME} r={want})")
        if built:
            bad += wrapper_rank_problems(built[0], built[1], pairs)
    except patterns.PatternError:
        return None  # the config rule reports the pattern
    return bad
