"""The binder: consumes `berth.proposals`, checks and reserves in one Redis Lua script,
re-checks cross-node constraints against its own view, waits on Permit (gangs), binds.

    binder.py     the binding cycle (Binder), one proposal at a time, many concurrently
    service.py    Kafka consumer group, outcomes, dead letters, offset commits (BinderService)
    messages.py   the Proposal message (berth.proposals)
    view.py       ClusterCache: nodes and bound pods as NodeColumns, fed by the change stream
    checks.py     the scheduler plugins' PreFilter + Filter re-run on one node
    gang.py       WaitOnPermit for coscheduling gangs across binders
"""
