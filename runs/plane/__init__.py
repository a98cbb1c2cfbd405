"""The execution plane: everything between the gate's verdict and the adapter's answer.

`execution` (prepare / invoke / finish around one adapter call, the only place that retries),
`breakers`, `credentials`, `mcp_servers`, `downstream_errors` (what a service said when it refused
a call), `contracts`, `asking` (what became of earlier work), `delivery` (a final outcome after a
provisional one), `alerts` and `aftermath`. Its tables (`models`) keep the `reliability` app label they
were created under, so no migration moved. Result hygiene (active content removed, provenance) is
`airlock_sdk.fencing`, shared with the SDK and the MCP gateway.
"""
