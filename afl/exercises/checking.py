"""How an exercise is checked: the student's function against afl's own implementation, on fresh random cases.

An :class:`Exercise` knows the reference (afl's implementation), how to draw cases (keyword arguments), and the
typical mistakes (wrong answers written out, each with a hint). Calling it on the student's function returns a
:class:`Verdict` that reads as a sentence:

* ``not done yet``: the function still raises ``NotImplementedError`` (the exercise notebooks' blank) or returns
  ``None`` / ``...``;
* an error: the function raised, with the exception's message and the case (never a traceback);
* not yet right: the first case where it disagrees, what was expected, what came back, and the hint of the
  mistake it matches (or a general one);
* correct: it agrees on every case.

In a notebook a verdict shows as its message, on the standard output when correct and on the error stream
otherwise (a red box in Jupyter), which is also how nbgrader grades a check cell: full marks for a correct one,
none for the rest. Each verdict is appended to the file ``$AFL_VERDICTS`` names, if set
(:mod:`afl.exercises.verdicts`).

An answer must be the student's own: a function of afl's, or one whose code reaches afl's code by any route the
check can see -- a name or an attribute chain (``afl.theory.favas.alpha``), an imported class (``QSGDQuantizer(...)
.bits(d)``), a checker's ``reference``, a closure or a default argument, a module imported by name -- is refused in
words. Messages name the paper's formula, never where afl computes it. An exercise that builds on an earlier one
(``contact_steps`` calls the student's ``expected_steps``) is judged with afl's answer for the earlier one inside
(``inner``), so that a mistake is reported where it is, and the verdict says so.

Cases are drawn from a seed fixed per exercise and assignment (``$AFL_CASE_SEED``; and per student where
``$AFL_STUDENT`` names one), so that the same notebook gets the same verdict every time it is checked (an
autograder's rerun included), and the verdict records it. Every exercise's cases begin with its boundaries (a
divisibility, zero progress, the cap reached, a single client, no staleness), drawn on purpose, then random ones.
"""
from __future__ import annotations

import contextvars
import copy
import hashlib
import importlib
import os
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np
import torch

from .verdicts import CORRECT, ERROR, NOT_DONE, WRONG, Verdict, record

#: the variable that fixes an assignment's cases (a teacher sets a new one for a new term)
SEED_ENV = "AFL_CASE_SEED"
#: wrong answers to an exercise after which its hint gives the formula instead of the idea
HINT_AFTER = 2
#: wrong verdicts so far in this kernel, per exercise
_WRONG_SO_FAR: dict[str, int] = {}
#: the wrong answers before the check being made (:meth:`Exercise.check`)
_TRIES: contextvars.ContextVar[int] = contextvars.ContextVar("tries", default=HINT_AFTER)


def case_seed(exercise: str) -> int:
    """The seed of ``exercise``'s cases: a hash of the assignment's ``$AFL_CASE_SEED``, the exercise and
    ``$AFL_STUDENT`` (when set), the same wherever and however often the check runs."""
    text = f"{os.environ.get(SEED_ENV, 'afl')}:{exercise}:{os.environ.get('AFL_STUDENT', '')}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


@dataclass(frozen=True)
class Mistake:
    """A typical wrong answer (same signature as the reference) and the hint that goes with it."""

    answer: Callable
    hint: str


def as_array(x) -> np.ndarray | None:
    """Numbers, tuples, lists, numpy arrays and tensors as one float64 array (None when not numeric)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    if isinstance(x, (tuple, list)) and x and all(isinstance(v, torch.Tensor) for v in x):
        return np.stack([as_array(v) for v in x])
    try:
        out = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        return None
    return out


def close(got, expected, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """Same shape and the same numbers to ``rtol``, and to ``atol`` times the expected's largest magnitude (at least
    1), NaN equal to NaN, inf to inf: a right answer computed in float32 passes (its rounding, some 1e-7 of each
    number and more after a cancellation), a wrong one does not."""
    a, b = as_array(got), as_array(expected)
    if a is None or b is None or a.shape != b.shape:
        return False
    finite = np.abs(b[np.isfinite(b)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    return bool(np.allclose(a, b, rtol=rtol, atol=atol * scale, equal_nan=True))


def show(x) -> str:
    """A short, readable rendering of an argument or a result."""
    if isinstance(x, torch.Tensor) or isinstance(x, np.ndarray):
        arr = as_array(x)
        text = np.array2string(arr, precision=4, threshold=8, edgeitems=3, separator=", ")
        return f"tensor({text})" if isinstance(x, torch.Tensor) else text
    if isinstance(x, float):
        return f"{x:.6g}"
    if isinstance(x, (list, tuple)):
        if len(x) > 8 or any(isinstance(v, (torch.Tensor, np.ndarray)) for v in x):
            arr = as_array(x)
            if arr is not None:
                return np.array2string(arr, precision=4, threshold=8, edgeitems=3, separator=", ")
        inner = ", ".join(show(v) for v in x)
        return f"({inner})" if isinstance(x, tuple) else f"[{inner}]"
    if callable(x):
        return getattr(x, "__name__", "a function")
    return repr(x)


def call_text(name: str, case: dict) -> str:
    return f"{name}(" + ", ".join(f"{k}={show(v)}" for k, v in case.items()) + ")"


class Unfinished(Exception):
    """The student's function is still the blank."""


@dataclass(frozen=True)
class Exercise:
    """One checked exercise: the student writes ``signature``; ``reference(**case)`` is afl's answer for each of
    ``cases(rng)``; ``same(got, expected)`` decides agreement; ``mistakes`` name the typical wrong answers. A wrong
    answer that matches no mistake gets ``idea`` (where to look) on its first :data:`HINT_AFTER` tries in this
    kernel, then ``hint`` (the formula): the hints are progressive, the verdict's status never depends on them."""

    name: str
    signature: str
    reference: Callable
    cases: Callable[[np.random.Generator], Iterable[dict]]
    source: str
    mistakes: tuple[Mistake, ...] = ()
    hint: str = ""
    same: Callable[[Any, Any], bool] = close
    implementations: tuple[str, ...] = ()    # "module:name" of afl's code that computes the answer
    inner: tuple[tuple[str, Callable], ...] = ()   # (name, afl's answer) of earlier exercises the answer may call
    idea: str = ""        # the first hint: where the answer comes from, not the formula (that is ``hint``)

    def __call__(self, fn: Callable, seed: int | None = None) -> Verdict:
        """Check ``fn`` on the exercise's cases (``seed``: other ones; default :func:`case_seed`), and record the
        verdict where ``$AFL_VERDICTS`` says."""
        verdict = self.check(fn, seed, _WRONG_SO_FAR.get(self.name, 0))
        if verdict.status == WRONG:
            _WRONG_SO_FAR[self.name] = _WRONG_SO_FAR.get(self.name, 0) + 1
        record(verdict)
        return verdict

    @property
    def function_name(self) -> str:
        return self.signature.split("(")[0]

    def verdict(self, status: str, message: str) -> Verdict:
        return Verdict(self.name, status, message)

    def check(self, fn: Callable, seed: int | None = None, tries: int = HINT_AFTER) -> Verdict:
        """The verdict on ``fn``, its cases drawn from ``seed`` (default :func:`case_seed`) and recorded in it;
        ``tries``: wrong answers before this one (fewer than :data:`HINT_AFTER`: the idea, not the formula)."""
        seed = case_seed(self.name) if seed is None else seed
        token = _TRIES.set(tries)
        try:
            verdict = self._check(fn, seed)
        finally:
            _TRIES.reset(token)
        return Verdict(verdict.exercise, verdict.status, verdict.message, seed)

    def _check(self, fn: Callable, seed: int) -> Verdict:
        if fn is None or fn is Ellipsis:
            return self.not_done()
        if not callable(fn):
            return self.verdict(ERROR, f"{self.name} needs your function `{self.signature}`, got {show(fn)}.")
        borrowed = self.borrowed(fn)
        if borrowed:
            return self.verdict(ERROR, f"{self.function_name}: this check wants your own code, and your function "
                                       f"{borrowed}. Write it from the formula above.")
        fn, swapped = self.with_inner(fn)
        rng = np.random.default_rng(seed)
        cases = list(self.cases(rng))
        try:
            for case in cases:
                problem = self.problem(fn, case, rng)
                if problem is not None:
                    return problem if not swapped else self.verdict(problem.status, problem.message + swapped)
        except Unfinished:
            return self.not_done()
        return self.verdict(CORRECT, f"Correct: `{self.function_name}` agrees with {self.source} on {len(cases)} "
                                     f"cases, its boundaries among them.{swapped}")

    def with_inner(self, fn: Callable) -> tuple[Callable, str]:
        """``fn`` with the earlier exercises it calls by name (:attr:`inner`) bound to afl's answers, so that a
        mistake in one of them is not blamed on this one; and the sentence that says so ('' when none is called)."""
        code, scope = getattr(fn, "__code__", None), getattr(fn, "__globals__", None)
        if code is None or scope is None:
            return fn, ""
        names = {name for c in code_objects(code) for name in c.co_names}
        used = {name: ref for name, ref in self.inner if name in names}
        if not used:
            return fn, ""
        bound = types.FunctionType(code, {**scope, **used}, fn.__name__, fn.__defaults__, fn.__closure__)
        bound.__kwdefaults__ = fn.__kwdefaults__
        listed = ", ".join(f"`{name}`" for name in used)
        return bound, f"\n  (checked with the reference answer for {listed} inside: only this function is judged)"

    def not_done(self) -> Verdict:
        return self.verdict(NOT_DONE, f"{self.function_name}: not done yet. Write `{self.signature}` in the marked "
                                      "cell, run that cell, then run this check again.")

    def borrowed(self, fn: Callable) -> str:
        """What makes ``fn`` not the student's own ('' if nothing): it is afl's code, or its code reaches afl's code
        (:func:`reaches_afl`) other than the earlier exercises it may call by name (:attr:`inner`)."""
        if fn is self.reference or _is_afl(fn):
            return "is afl's own"
        targets = {id(_resolve(path)): path.split(":")[1] for path in self.implementations}
        found = reaches_afl(fn, allowed={name for name, _ in self.inner})
        for route, obj in found:
            if isinstance(obj, Exercise):
                return f"uses the checker `{route}`, which holds the answer"
        for route, obj in found:
            if id(obj) in targets:
                return f"calls afl's `{targets[id(obj)]}` ({route}), which computes the answer"
        return f"uses afl's `{found[0][0]}`" if found else ""

    def call(self, fn: Callable, case: dict, **shared):
        """``fn(**case, **shared)`` on copies of the case's arguments (``shared`` ones, e.g. a random generator, are
        passed as they are); :class:`Unfinished` for the blank."""
        try:
            out = fn(**copy.deepcopy(case), **shared)
        except NotImplementedError:
            raise Unfinished from None
        if out is None or out is Ellipsis:
            raise Unfinished
        return out

    def problem(self, fn: Callable, case: dict, rng: np.random.Generator) -> Verdict | None:
        """None when ``fn`` answers ``case`` right, else the verdict that says what is wrong."""
        try:
            got = self.call(fn, case)
        except Unfinished:
            raise
        except Exception as err:                         # the student's error, reported in words
            return self.verdict(ERROR, f"Your function raised {type(err).__name__}: {err}\n"
                                       f"  on the case {call_text(self.function_name, case)}.")
        expected = self.reference(**copy.deepcopy(case))
        if self.same(got, expected):
            return None
        return self.wrong(case, got, expected)

    def wrong(self, case: dict, got, expected, extra: str = "") -> Verdict:
        general = self.idea if self.idea and _TRIES.get() < HINT_AFTER else self.hint
        hint = next((m.hint for m in self.mistakes if self.same(got, m.answer(**copy.deepcopy(case)))), general)
        a, b = as_array(got), as_array(expected)
        if a is not None and b is not None and a.shape != b.shape and a.size == b.size and self.same(
                a.reshape(b.shape), expected):
            hint = (f"the numbers are right, the shape is not: return shape {b.shape or 'a single number'} "
                    f"(yours has shape {a.shape}).")
        shape = (f" (shape {a.shape}, expected {b.shape})" if a is not None and b is not None and a.shape != b.shape
                 else "")
        text = (f"Not yet right: {call_text(self.function_name, case)}\n"
                f"  returned {show(got)}{shape}\n  expected {show(expected)}{extra}")
        return self.verdict(WRONG, text + (f"\n  Hint: {hint}" if hint else ""))


def code_objects(code: types.CodeType | None):
    """``code`` and every function nested in it (none for None)."""
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        yield c


def _is_afl(obj) -> bool:
    """Whether ``obj`` is afl's: a module of afl, something defined in one (a checker included), or an instance of
    an afl class."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__.split(".")[0] == "afl"
    if isinstance(obj, Exercise):
        return True
    owner = obj if callable(obj) or isinstance(obj, type) else type(obj)
    module = getattr(owner, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] == "afl"


def reaches_afl(fn: Callable, allowed=frozenset(), _walked=None) -> list[tuple[str, Any]]:
    """``[(route, obj), ...]``: the afl objects ``fn``'s code reaches (``afl.theory.favas.alpha``, an imported afl
    class, function or object, a checker and its ``reference``), through its global names and their attributes
    named in the code, its closure, its defaults and the functions it calls, nested ones included; a string
    constant naming afl (``__import__("afl")``) counts as reaching afl. Empty if it reaches none; global names in
    ``allowed`` are passed over."""
    code, scope = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    walked = set() if _walked is None else _walked
    if code is None or id(code) in walked:
        return []
    walked.add(id(code))
    codes = list(code_objects(code))
    found = [("afl (imported by name)", importlib.import_module("afl")) for c in codes
             if any(isinstance(k, str) and k.split(".")[0] == "afl" for k in c.co_consts)][:1]
    attributes = {name for c in codes for name in c.co_names}
    roots = [(name, scope[name]) for name in sorted(attributes) if name in scope and name not in allowed]
    roots += [(f"a variable of {fn.__name__}", cell.cell_contents) for cell in fn.__closure__ or ()
              if _has_contents(cell)]
    roots += [(f"a default of {fn.__name__}", v) for v in (fn.__defaults__ or ()) + tuple(
        (fn.__kwdefaults__ or {}).values())]
    seen: set = set()
    frontier = roots[::-1]
    while frontier:
        here, o = frontier.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if _is_afl(o):
            found.append((here, o))
        if isinstance(o, (types.ModuleType, type, Exercise)):
            frontier += [(f"{here}.{a}", getattr(o, a)) for a in sorted(attributes) if hasattr(o, a)]
        elif isinstance(o, types.FunctionType):
            found += [(f"{here} -> {r}", x) for r, x in reaches_afl(o, allowed, walked)]
    return found


def _has_contents(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _resolve(path: str):
    module, name = path.split(":")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def mine_or_reference(fn: Callable, exercise: Exercise) -> Callable:
    """``fn`` once it passes ``exercise``, else afl's reference (saying so), so that the cells after an exercise
    run whether or not it is done."""
    verdict = exercise.check(fn)
    if verdict.passed:
        return fn
    state = {NOT_DONE: "not done yet", ERROR: "not your own code yet" if "own code" in verdict.message
             else "raising an error"}.get(verdict.status, "not right yet")
    print(f"(your `{exercise.function_name}` is {state}: the next cells use afl's answer instead)")
    return exercise.reference


__all__ = ["Verdict", "Mistake", "Exercise", "mine_or_reference", "close", "show", "case_seed", "reaches_afl",
           "NOT_DONE", "ERROR", "WRONG", "CORRECT", "SEED_ENV"]
