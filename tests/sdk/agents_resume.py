"""A fresh process that resumes an OpenAI Agents SDK run from its serialised state
(`python -m tests.sdk.agents_resume`, a JSON job on stdin, the outcome as JSON on stdout).

It knows only what a restarted agent would: Airlock's address and key, the run id and the saved
state. It waits for Airlock's decision on the run's event long poll and finishes the run with a
scripted model (the one third-party edge that is faked: the LLM).
"""

import asyncio
import json
import sys

from agents import Agent, RunState, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message
from airlock_sdk import Airlock, ClientSkillRegistry
from airlock_sdk.integrations.openai_agents import AirlockAgents


async def resume(job: dict) -> dict:
    set_tracing_disabled(True)  # the framework's own exporter would call OpenAI's servers
    airlock = Airlock(job["url"], job["key"], cache_dir=job["cache_dir"], client_skills=ClientSkillRegistry())
    airlock_agents = AirlockAgents(airlock.get_run(job["run_id"]), approval_timeout=60)
    model = ScriptedModel([[assistant_message(job["final_message"])]])
    agent = Agent(name=job["agent"], model=airlock_agents.model(model), tools=airlock_agents.tools())
    state = await RunState.from_string(agent, job["state"])
    state = await airlock_agents.resolve(state)
    result = await airlock_agents.invoke(agent, state)
    outputs = [i for i in model.calls[-1].input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    return {
        "final_output": result.final_output,
        "interruptions": len(result.interruptions),
        "outputs": {o["call_id"]: o["output"] for o in outputs},
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(resume(json.loads(sys.stdin.read())))))
