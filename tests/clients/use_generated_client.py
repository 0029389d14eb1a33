"""Uses a client generated from chatgate's /openapi.json (openapi-python-client) the way an
operator's tooling would: list commands, read one's status and evidence, run a recovery, follow the
recovery command, read the agents, the audit and the trace. Every answer is parsed by the generated
models, so a response that does not match its schema fails here.

Usage: use_generated_client.py PACKAGE_DIR BASE_URL API_TOKEN HOOKS_TOKEN FAILING_AGENT
PACKAGE_DIR holds the generated package `chatgate_client`. The command is created through the hook
bridge for FAILING_AGENT (an executor that always fails), so that it can be retried.
"""

import sys
import time

import httpx


def main() -> None:
    package_dir, base_url, api_token, hooks_token, failing_agent = sys.argv[1:6]
    sys.path.insert(0, package_dir)
    from chatgate_client import AuthenticatedClient
    from chatgate_client.api.agents import list_agents, resume
    from chatgate_client.api.audit import audit
    from chatgate_client.api.commands import command_status, evidence, list_commands, trace
    from chatgate_client.api.recovery import recovery_request
    from chatgate_client.models import (
        AgentList,
        AgentState,
        AgentView,
        Problem,
        AuditVerdict,
        CommandPage,
        CommandStatus,
        EvidenceList,
        RecoveryAction,
        RecoveryRequestBody,
        RecoveryRequestBodyAction,
        RecoveryStarted,
        State,
        TraceGraph,
    )

    client = AuthenticatedClient(base_url=base_url, token=api_token, raise_on_unexpected_status=True)
    # The fuzzing before this may have paused the agent: its commands would wait.
    agents = list_agents.sync(client=client)
    assert isinstance(agents, AgentList) and agents.agents, agents
    for agent in agents.agents:
        if agent.state == AgentState.PAUSED:
            resumed = resume.sync(agent.agent, client=client)
            assert isinstance(resumed, (AgentView, Problem)), resumed

    # A command for an agent that fails, through the hook bridge (not part of the client under test).
    answer = httpx.post(
        f"{base_url}/hooks/agent",
        headers={"Authorization": f"Bearer {hooks_token}"},
        json={"message": "generated client check", "agentId": failing_agent},
    )
    assert answer.status_code == 202, answer.text
    command_id = answer.json()["command_id"]

    status = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = command_status.sync(command_id, client=client)
        assert isinstance(status, CommandStatus), status
        if status.state == State.FAILED:
            break
        time.sleep(0.2)
    assert status is not None and status.state == State.FAILED, status
    assert str(status.command_id) == command_id
    assert status.transitions, "the single command's view carries its moves"
    assert RecoveryAction.RETRY in status.recovery_actions, status.recovery_actions

    page = list_commands.sync(client=client, limit=200)
    assert isinstance(page, CommandPage), page
    assert any(str(c.command_id) == command_id for c in page.commands), "the command is listed"

    artifacts = evidence.sync(command_id, client=client)
    assert isinstance(artifacts, EvidenceList), artifacts
    kinds = [a.kind for a in artifacts.artifacts]
    assert "command.accepted" in kinds and "execution.failed" in kinds, kinds

    body = RecoveryRequestBody(action=RecoveryRequestBodyAction.RETRY, reason="generated client check")
    started = recovery_request.sync(command_id, client=client, body=body)
    assert isinstance(started, RecoveryStarted), started
    assert str(started.target_command_id) == command_id
    follow = command_status.sync(str(started.recovery_command_id), client=client)
    assert isinstance(follow, CommandStatus), follow

    verdict = audit.sync(client=client)
    assert isinstance(verdict, AuditVerdict) and verdict.intact, verdict
    graph = trace.sync(status.envelope.correlation_id, client=client)
    assert isinstance(graph, TraceGraph) and graph.nodes, graph
    print(f"generated client: {len(page.commands)} commands listed, {len(kinds)} artifacts, "
          f"recovery {started.recovery_command_id} started ({started.state})")


if __name__ == "__main__":
    main()
