"""Knowledge checks: a few multiple-choice or numeric questions at the end of each walkthrough, checked in words
like the exercises and recorded with their verdicts (``$AFL_VERDICTS``).

In a notebook: ``quiz = QUIZZES["01_favas"]``, ``quiz.show()`` prints the questions, the student fills
``answers = {"q1": "b", "q2": 21, ...}`` and ``quiz(answers)`` says, for each question answered wrong, why (the
reasoning, never the answer), and *correct* once all are right. Unanswered questions (``None``) make it
*not done yet*.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .verdicts import CORRECT, ERROR, NOT_DONE, WRONG, Verdict, record


@dataclass(frozen=True)
class Question:
    """``text``; ``choices`` (multiple choice, lettered a, b, c, ...) or none (a number, right within ``rtol``);
    ``answer``: the letter or the number; ``why``: the reasoning shown when it is answered wrong."""

    text: str
    answer: str | float
    why: str
    choices: tuple[str, ...] = ()
    rtol: float = 0.01

    def right(self, given) -> bool:
        if self.choices:
            return isinstance(given, str) and given.strip().lower().rstrip(")") == self.answer
        try:
            return math.isclose(float(given), float(self.answer), rel_tol=self.rtol, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False


@dataclass(frozen=True)
class Quiz:
    """A walkthrough's knowledge check: its ``questions`` keyed ``q1``, ``q2``, ..."""

    name: str
    title: str
    questions: tuple[Question, ...]

    @property
    def keys(self) -> list[str]:
        return [f"q{k}" for k in range(1, len(self.questions) + 1)]

    def blank(self) -> dict:
        """The answers dict a student fills in."""
        return dict.fromkeys(self.keys)

    def text(self) -> str:
        lines = [f"{self.title}: answer in `answers` below (a letter, or a number), then run the check."]
        for key, q in zip(self.keys, self.questions):
            lines.append(f"{key}. {q.text}")
            lines += [f"    {letter}) {choice}" for letter, choice in zip("abcdefgh", q.choices)]
        return "\n".join(lines)

    def show(self) -> None:
        print(self.text())

    def check(self, answers) -> Verdict:
        if not isinstance(answers, dict):
            return Verdict(self.name, ERROR, f"{self.name}: `answers` must be a dict like {self.blank()}, got "
                                             f"{type(answers).__name__}.")
        unknown = sorted(set(answers) - set(self.keys))
        if unknown:
            return Verdict(self.name, ERROR, f"{self.name}: no question {', '.join(map(str, unknown))}; the "
                                             f"questions are {', '.join(self.keys)}.")
        missing = [k for k in self.keys if answers.get(k) is None]
        if len(missing) == len(self.keys):
            return Verdict(self.name, NOT_DONE, f"{self.name}: not done yet. Fill `answers` ({', '.join(self.keys)}: a "
                                                "letter for a multiple choice, else a number) and run this again.")
        wrong = [(k, q) for k, q in zip(self.keys, self.questions) if answers.get(k) is not None
                 and not q.right(answers[k])]
        if wrong:
            lines = [f"{self.name}: {len(self.keys) - len(missing) - len(wrong)} of {len(self.keys)} right so far."]
            lines += [f"  {k}: not yet. {q.why}" for k, q in wrong]
            if missing:
                lines.append(f"  Still to answer: {', '.join(missing)}.")
            return Verdict(self.name, WRONG, "\n".join(lines))
        if missing:
            return Verdict(self.name, NOT_DONE, f"{self.name}: right so far; still to answer: {', '.join(missing)}.")
        return Verdict(self.name, CORRECT, f"Correct: all {len(self.keys)} answers of {self.title} are right.")

    def __call__(self, answers) -> Verdict:
        verdict = self.check(answers)
        record(verdict)
        return verdict


def _mc(text: str, choices: tuple[str, ...], answer: str, why: str) -> Question:
    return Question(text, answer, why, choices)


QUIZZES = {q.name: q for q in (
    Quiz("knowledge_00a", "Federated learning in 20 minutes", (
        _mc("With K = 1 local step per round, where does FedAvg settle on the quadratic clients?",
            ("at the minimiser x* of the average loss", "at the plain mean of the clients' minimisers",
             "beside x*, farther for steeper clients"), "a",
            "one local step is one gradient step of the average loss: no client can drift before averaging."),
        _mc("As K grows without bound, FedAvg's fixed point tends to ...",
            ("x*", "the plain mean of the clients' minimisers c_i", "the steepest client's minimiser"), "b",
            "with endless local steps every client reaches its own minimiser before the server averages."),
        _mc("Every client has the same curvature (A_i = I) but its own minimiser. With K = 20, FedAvg ...",
            ("settles beside x*", "settles at x*"), "b",
            "drift comes from losses of different shapes moving clients by different amounts; equal curvatures "
            "move every client the same way (section 3's green line)."),
        _mc("Why take K > 1 local steps at all?",
            ("a round makes more progress, so fewer rounds (messages) reach the floor",
             "local steps remove client drift", "local steps make the fixed point exact"), "a",
            "section 4: more local steps per round trade communication against the floor that drift sets."),
    )),
    Quiz("knowledge_00", "The simulator", (
        Question("A client with exponential step times of mean 2 trains for a window of 10 time units, with no cap. "
                 "How many steps does it finish on average?", 5.0,
                 "steps of mean 2 arrive at rate 1/2: in a window of 10, on average 10 / 2 of them."),
        _mc("Under FAVAS's server clock (s of n clients contacted each tick, uniformly), the number of ticks "
            "between two contacts of one client is ...",
            ("always n / s", "geometric with p = s / n", "Poisson of mean n / s"), "b",
            "each tick draws the client with probability s / n, independently of the other ticks: the first "
            "success of independent trials."),
        Question("With n = 100 clients, s = 20 contacted per tick and a tick every 10 time units, what is the mean "
                 "time between two contacts of a client?", 50.0,
                 "the mean number of ticks is 1 / p = n / s; multiply by the tick's length."),
        _mc("Why do fast clients dominate an unweighted average of uploads under this clock?",
            ("they hold more data", "their uploads carry more local steps' progress",
             "they are contacted more often"), "b",
            "every client is contacted equally often (s of n uniformly); what differs is how many steps it has "
            "done when contacted."),
    )),
    Quiz("knowledge_01", "FAVAS", (
        _mc("A FedAvg round with stragglers among its s clients lasts until ...",
            ("the fastest client finishes", "the slowest of its s clients finishes its K steps",
             "a fixed server period"), "b",
            "a synchronous round averages all s updates, so it waits for the last of them."),
        _mc("FAVAS's deterministic reweighting alpha_i of client i is ...",
            ("K", "E[E_i ∧ K] under client i's law of steps", "the steps e_i it reports"), "b",
            "eq. (1): divide by the expected progress so that every client's expected upload is one step's worth."),
        _mc("When the server contacts a FAVAS client, the client ...",
            ("keeps training from its own model, mixed with the server's (as QuAFL)",
             "sends its reweighted model and restarts from the server's model", "first finishes its K steps"), "b",
            "Algorithm 1: the restart from the server's model is what keeps clients from drifting (section 4)."),
        Question("The server averages the uploads of s = 20 contacted clients with its own model. By what number "
                 "does it divide the sum?", 21.0, "count the models in the average: the uploads and the server's "
                                                  "own (Sec. 4)."),
        Question("Beyond the paper (section 4b): FedAsync mixes an arriving model in with weight alpha (tau + 1)^-a. "
                 "With alpha = 0.6 and a = 0.5, what weight does a model 3 server steps stale get?", 0.3,
                 "(3 + 1)^-0.5 = 1/2: three steps of staleness halve the weight alpha."),
    )),
    Quiz("knowledge_02", "Generalized heavy-ball momentum", (
        _mc("GHBM's momentum at round t is ...",
            ("the server's last step (classical heavy ball)", "the server's average step over its last tau rounds",
             "each client's own past gradients"), "b",
            "eq. (7): theta^{t-1} - theta^{t-tau-1}, divided by tau."),
        _mc("With tau = 1, GHBM is ...", ("FedAvg", "FedCM / FedADC's momentum of one round", "SCAFFOLD"), "b",
            "a window of one round is the last server step: the momentum FedCM and FedADC send."),
        Question("n = 100 clients, s = 10 per round under cyclic sampling: after how many rounds has every client "
                 "been seen (1/C)?", 10.0, "C = s / n is the share of clients a round; cyclic sampling takes them "
                                           "in turn."),
        _mc("FedHBM computes its momentum from ...",
            ("the server's past models, sent down every round", "the model a client kept from its last "
             "participation (no extra download)", "control variates"), "b",
            "the anchor a client holds since it was last sampled spans the rounds it missed: the paper's "
            "communication-free variant."),
    )),
    Quiz("knowledge_03", "QAFeL", (
        _mc("QAFeL's server broadcasts ...",
            ("its model, quantized", "the quantized change since the hidden state both sides share",
             "the clients' updates"), "b",
            "eqs. (3)-(4): q = Q(x - x_hat), then x_hat <- x_hat + q on both sides."),
        Question("How many bits is one 4-bit QSGD message of d = 1,000 coordinates with a single float32 scale?",
                 4032.0, "bits per coordinate times d, plus 32 for the scale (Example B.1).", rtol=0.0),
        _mc("Why round stochastically between the two neighbouring levels?",
            ("it errs less than rounding to the nearest", "it is unbiased, E[Q(x)] = x, so errors average out",
             "it needs fewer bits"), "b",
            "rounding to the nearest errs less but always the same way; the analysis needs E[Q(x)] = x."),
        _mc("On afl's offline substitute, 8-bit and 4-bit client channels err about the same because ...",
            ("the channel's scale stays at float32's epsilon when an update's range is tiny (the floor)",
             "the 8-bit channel is broken", "the hidden state hides the bits"), "a",
            "results/qafel/README.md: at the paper's step size an update's range sits below the floor of the "
            "FLSim channel's scale."),
    )),
    Quiz("knowledge_04", "FedAST", (
        Question("R = 4 requests run at once, each for an exponential time of rate 1. What is the expected time "
                 "until all four have finished?", 1 + 1 / 2 + 1 / 3 + 1 / 4,
                 "the slowest of R exponentials: a sum of waits of rates R, R - 1, ..., 1 (H_R / lambda)."),
        Question("Same R = 4 at rate 1, each finished request replaced at once: expected time until a buffer of b = 2 "
                 "has filled?", 0.5, "arrivals come at rate R lambda: b of them take b / (R lambda)."),
        _mc("Realloc gives a task more requests when ...",
            ("its updates disagree more (larger sigma_m)", "it is easier", "it takes fewer local steps"), "a",
            "eq. (7)'s optimum: R_m grows with sigma_m sqrt(eta_s eta_c tau_m)."),
        _mc("A Sync-ST round (synchronous training of several tasks) waits for ...",
            ("the slowest of its clients", "the first b arrivals"), "a",
            "synchronous: the round averages all its clients, so stragglers set its length."),
    )),
    Quiz("knowledge_05", "The theory tour", (
        _mc("GHBM's factor E[(U/n)^2] (clients not seen in the window) shrinks as ...",
            ("tau grows", "tau shrinks"), "a", "a longer window has had more chances to draw every client."),
        _mc("Which grows with R, the clients in flight?", ("a synchronous round's expected length",
                                                           "the time to fill a buffer of fixed size b"), "a",
            "H_R / lambda grows like log R; b / (R lambda) shrinks."),
        _mc("In QAFeL's bound, fewer bits ...", ("enlarge the quantization terms (a smaller delta)",
                                                 "change nothing"), "a",
            "Definition 2.1's delta measures how much a message keeps; fewer bits keep less."),
        _mc("A bound with an optimum in K (local steps) has it because ...",
            ("more local steps shrink the optimization term but grow the drift and noise terms",
             "K enters no term"), "a", "the trade-off of 00a's section 4, in the bounds' terms."),
    )),
)}

__all__ = ["Question", "Quiz", "QUIZZES"]
