"""The one policy evaluator: pure Python over CEL, used by the server's gate and by the SDK's local decisions.

The server imports it (`policies.engine`, `runs.authorization`) and the SDK decides from a signed decision
bundle with it, so the two cannot disagree on a verdict or a reason. No Django here, ever.
"""
