"""The LangGraph agent of the integration tests, and a fresh process that resumes it from its
SQLite checkpoint (`python -m tests.sdk.langgraph_resume`, a JSON job on stdin, the outcome as
JSON on stdout). The chat model is langchain-core's scripted one (the LLM is the faked edge).
"""

import json
import sqlite3
import sys

from airlock_sdk import Airlock, ClientSkillRegistry
from airlock_sdk.integrations.langgraph import AirlockToolNode, AirlockTracer, decisions
from airlock_sdk.run import Run
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command


def build_graph(run: Run, replies: list[AIMessage], checkpoint_path: str):
    model = GenericFakeChatModel(messages=iter(replies))
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", AirlockToolNode(run))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", lambda state: "tools" if state["messages"][-1].tool_calls else END)
    builder.add_edge("tools", "agent")
    saver = SqliteSaver(sqlite3.connect(checkpoint_path, check_same_thread=False))
    return builder.compile(checkpointer=saver, name="support")


def config_for(run: Run) -> dict:
    return {"configurable": {"thread_id": run.run_id}, "callbacks": [AirlockTracer(run)]}


def tool_outputs(messages) -> dict[str, dict]:
    return {m.tool_call_id: {"content": m.content, "status": m.status} for m in messages if m.type == "tool"}


def resume(job: dict) -> dict:
    airlock = Airlock(job["url"], job["key"], cache_dir=job["cache_dir"], client_skills=ClientSkillRegistry())
    run = airlock.get_run(job["run_id"])
    graph = build_graph(run, [AIMessage(content=job["final_message"])], job["checkpoint"])
    config = config_for(run)
    [pending] = graph.get_state(config).interrupts
    state = graph.invoke(Command(resume=decisions(run, pending, timeout=60)), config)
    return {
        "final": state["messages"][-1].content,
        "interrupts": len(state.get("__interrupt__", [])),
        "tools": tool_outputs(state["messages"]),
    }


if __name__ == "__main__":
    print(json.dumps(resume(json.loads(sys.stdin.read()))))
