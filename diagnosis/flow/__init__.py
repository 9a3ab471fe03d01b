"""The diagnosis flow: Planner → Executor → Gatekeeper → Verifier → router → Composer."""
