"""What the Lyapunov claim modules (``lyapunov``, ``lyapunov_sos``) share: the source line of their
statements. A module whose name starts with ``_`` registers nothing."""

SOURCE = "lecture notes 001 (application to mathematics: Lyapunov functions)"
