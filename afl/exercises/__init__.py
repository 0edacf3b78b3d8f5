"""Checked exercises for the classroom (``notebooks/exercises``): each ``check_*`` runs a student's function on
its cases (boundaries first, then random ones from a seed fixed per assignment) against afl's own implementation
and answers in words (:mod:`afl.exercises.checking`).

Simulator (notebook 00): ``check_expected_steps`` (E[E ∧ K] in a window), ``check_contact_steps`` (at a contact
of the server clock). FAVAS (01): ``check_alpha`` (eq. (1)), ``check_unbiased_upload`` (Alg. 1, l. 24),
``check_server_average`` (Sec. 4's 1/(s + 1)). GHBM (02): ``check_ghbm_momentum`` (eq. (7)),
``check_unseen_fraction`` (Lemma 4.4's factor), ``check_smallest_tau``. FedBuff / QAFeL (03):
``check_buffered_step``, ``check_qsgd`` (Example B.1), ``check_qsgd_bits``, ``check_hidden_state`` (eqs. (3)-(4));
beyond the papers (01, section 4b): ``check_fedasync_mix`` (FedAsync's staleness mixing).
FedAST (04): ``check_realloc`` (eq. (7)), ``check_round_times`` (b/(R lam) against H_R/lam). Each module's
docstring states what the student writes.
"""
from .buffered import check_buffered_step, check_fedasync_mix, check_hidden_state, check_qsgd, check_qsgd_bits
from .checking import Exercise, Mistake, Verdict, mine_or_reference
from .favas import check_alpha, check_server_average, check_unbiased_upload
from .fedast import check_realloc, check_round_times
from .ghbm import check_ghbm_momentum, check_smallest_tau, check_unseen_fraction
from .quiz import QUIZZES, Quiz
from .simulator import check_contact_steps, check_expected_steps

CHECKS = {c.name: c for c in (check_expected_steps, check_contact_steps, check_alpha, check_unbiased_upload,
                              check_server_average, check_ghbm_momentum, check_unseen_fraction, check_smallest_tau,
                              check_buffered_step, check_qsgd, check_qsgd_bits, check_hidden_state, check_realloc,
                              check_round_times, check_fedasync_mix)}

__all__ = ["Exercise", "Mistake", "Verdict", "mine_or_reference", "CHECKS", "QUIZZES", "Quiz", *CHECKS]
