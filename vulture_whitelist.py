"""Names vulture reports as unused at --min-confidence 60 that are used (issue 14 item 8.5).

Vulture's whitelist style (its README, "Whitelists"; its bundled whitelists/*.py): each line
uses one name, so vulture counts it as used wherever the package defines it.  Vulture matches
by name alone, so one line covers every definition of that name (``model_config``, ``_coherent``,
``exc_type``, ...).  Each line says why the name is used; ``unused:`` lines are names that really
are unused but live in files another owner is changing, for that owner to remove.

Checked by tests/core/test_unused.py, which also fails when a line here whitelists a name
vulture no longer reports (remove the line).  Run it as
``vulture triz_ri_smart_ai_evaluator vulture_whitelist.py --min-confidence 60 --exclude ...``.
"""

# ruff: noqa: B018
# Every line below is a bare attribute access on purpose: that is the whitelist.


class _Whitelist:
    """Accepts any attribute, so this file also runs (vulture's ``Whitelist`` helper)."""

    def __getattr__(self, name: str) -> None:
        return None


# -- typer commands: registered by @<group>.command(...), called by typer ---------------------
typer_command = _Whitelist()
typer_command.catalogue_list  # cli/catalogue.py
typer_command.loop_status  # cli/loop.py
typer_command.loop_mode  # cli/loop.py
typer_command.loop_monitor  # cli/loop.py
typer_command.catalogue_show  # cli/catalogue.py
typer_command.catalogue_validate  # cli/catalogue.py
typer_command.catalogue_schema  # cli/catalogue.py
typer_command.catalogue_publish  # cli/catalogue.py
typer_command.run_command  # cli/document.py, cli/harness.py
typer_command.verify_command  # cli/document.py
typer_command.calibrate_command  # cli/document.py
typer_command.examples_command  # cli/harness.py
typer_command.ledger_init  # cli/ledger.py
typer_command.ledger_verify  # cli/ledger.py
typer_command.ledger_recompute  # cli/ledger.py
typer_command.ledger_checkpoint  # cli/ledger.py
typer_command.ledger_prove  # cli/ledger.py
typer_command.ledger_consistency  # cli/ledger.py
typer_command.ledger_verify_proof  # cli/ledger.py
typer_command.ledger_reconcile  # cli/ledger.py
typer_command.witness_init  # cli/ledger.py
typer_command.witness_cosign_cmd  # cli/ledger.py
typer_command.attempt_evaluate  # cli/ledger.py
typer_command.attempt_show  # cli/ledger.py
typer_command.escrow_settle  # cli/ledger.py
typer_command.escrow_sign_confirmation  # cli/ledger.py
typer_command.init_command  # cli/service.py
typer_command.rotate_key_command  # cli/service.py
typer_command.revoke_key_command  # cli/service.py
typer_command.signal_compute  # cli/signal.py
typer_command.signal_explain  # cli/signal.py

# -- FastAPI: handlers registered by decorators, header parameters read by FastAPI ------------
fastapi = _Whitelist()
fastapi.evaluator_error  # service/app.py: @app.exception_handler(EvaluatorError)
fastapi.http_error  # service/app.py: @app.exception_handler(StarletteHTTPException)
fastapi.health  # service/app.py: GET /v1/health
fastapi.attempt_breakdown  # service/app.py: GET /v1/trusted/attempts/{attempt_id}
fastapi.route_class  # service/app.py: app.router.route_class, read by FastAPI for new routes
fastapi.x_triz_principal  # service/app.py: Header() parameters, in the OpenAPI schema
fastapi.x_triz_timestamp  # service/app.py: Header() parameter, as above
fastapi.x_triz_nonce  # service/app.py: Header() parameter, as above
fastapi.x_triz_signature  # service/app.py: Header() parameter, as above
fastapi.harness_queued  # service/app.py: Submitted response field, serialised by FastAPI

# -- pydantic: model configuration, validators and fields (read by pydantic) ------------------
pydantic = _Whitelist()
pydantic.model_config  # every BaseModel's ConfigDict
pydantic.model_post_init  # verifier/inputs.py: hook pydantic calls after validation
pydantic._human_needs_examples  # rules/checklist.py: @model_validator
pydantic._not_vague  # rules/checklist.py: @field_validator
pydantic._critical_is_not_compensable  # rules/checklist.py: @model_validator
pydantic._negative_is_negative  # rules/formula.py: @model_validator
pydantic._delayed_is_complete  # rules/formula.py: @model_validator
pydantic._bounds_match_kind  # rules/indicators.py: @model_validator
pydantic._method_is_a_measurement  # rules/indicators.py: @field_validator
pydantic._not_a_proxy  # rules/indicators.py: @model_validator
pydantic._rule_matches_direction  # rules/indicators.py: @model_validator
pydantic._ground_is_predefined  # rules/indicators.py: @field_validator
pydantic._coherent  # rules/indicators.py, rules/task_class.py: @model_validator
pydantic._versions_in_order  # rules/indicators.py: @model_validator
pydantic._consistent  # verifier/inputs.py: @model_validator
pydantic._not_empty  # verifier/inputs.py: @model_validator
pydantic._one  # service/config.py: @model_validator
pydantic._unique  # service/config.py: @model_validator
pydantic._degree_only_for_degree  # signal/inputs.py: @model_validator
pydantic._check_base_url  # verifier/chat.py: @field_validator
pydantic._check_model  # verifier/chat.py: @field_validator
pydantic._check_api_key_env  # verifier/chat.py: @field_validator
# Catalogue fields (rules/*): part of the published rules, canonical JSON and schema (spec 2)
pydantic.procedure  # rules/checklist.py: Verification.procedure
pydantic.verification  # rules/checklist.py: ChecklistItem.verification
pydantic.justification  # rules/formula.py, rules/indicators.py: Threshold, Limit, Block, ...
pydantic.shift_protection  # rules/formula.py: Limit.shift_protection
pydantic.measurement_method  # rules/indicators.py: Indicator.measurement_method
pydantic.distortion  # rules/task_class.py: Threat.distortion (spec 2.10)
pydantic.entry_point  # rules/task_class.py: Threat.entry_point (spec 2.10)
pydantic.protection  # rules/task_class.py: Threat.protection (spec 2.10)
pydantic.threat_model  # rules/task_class.py: TaskClass.threat_model (spec 2.10)
# Ledger payload fields (ledger/payloads.py): written into the recorded event's data
pydantic.submitted_by  # ledger/payloads.py
pydantic.known_mean  # ledger/payloads.py: divergence.checked, read by auditors in the ledger
pydantic.hidden_mean  # ledger/payloads.py: divergence.checked, read by auditors in the ledger
pydantic.known_ahead  # ledger/payloads.py: divergence.checked, read by auditors in the ledger
pydantic.hidden_ahead  # ledger/payloads.py: divergence.checked, read by auditors in the ledger
pydantic.p_value  # ledger/payloads.py: divergence.checked, read by auditors in the ledger
pydantic.class_mode  # ledger/payloads.py: set through model_copy(update=...) in evaluation/loop
pydantic.via  # ledger/payloads.py
pydantic.stored_by  # ledger/payloads.py
pydantic.candidate_sha256  # ledger/payloads.py
pydantic.matrix_version  # ledger/payloads.py
pydantic.planner  # verifier/pipeline.py: the task file's roles.planner (optional)

# -- enum members: values the catalogue, the ledger and the inputs files may hold -------------
enum_member = _Whitelist()
enum_member.AUTOMATED_TEST  # rules/checklist.py: VerificationKind
enum_member.RECEIVER_RECORD  # rules/checklist.py: VerificationKind
enum_member.HTTP_PROBE  # rules/checklist.py: VerificationKind
enum_member.HASH_COMPARISON  # rules/checklist.py: VerificationKind
enum_member.STATIC_ANALYSIS  # rules/checklist.py: VerificationKind
enum_member.SOURCE_COMPARISON  # rules/checklist.py: VerificationKind
enum_member.SCHEMA_VALIDATION  # rules/checklist.py: VerificationKind
enum_member.SANDBOX_RECORD  # rules/checklist.py: VerificationKind
enum_member.LEDGER_RECORD  # rules/checklist.py: VerificationKind
enum_member.MAJOR  # rules/checklist.py: Severity
enum_member.MINOR  # rules/checklist.py: Severity
enum_member.SHADOW  # rules/formula.py: Mode
enum_member.LIMITED  # rules/formula.py: Mode
enum_member.TRAINING  # rules/formula.py: Mode
enum_member.FORFEIT_HELD  # rules/formula.py: AtDeadline
enum_member.RECEIVER  # rules/indicators.py: SourceKind
enum_member.VERIFIER_CODE  # rules/indicators.py: SourceKind
enum_member.VERIFIER_MODEL  # rules/indicators.py: SourceKind
enum_member.EXTERNAL_SYSTEM  # rules/indicators.py: SourceKind
enum_member.FUNCTION_CHANGED  # rules/indicators.py: BenchmarkGround (spec 4.4)
enum_member.TOOL_CHANGED  # rules/indicators.py: BenchmarkGround (spec 4.4)
enum_member.MANDATORY_STANDARD_CHANGED  # rules/indicators.py: BenchmarkGround (spec 4.4)
enum_member.PERMITTED_RESOURCE_CHANGED  # rules/indicators.py: BenchmarkGround (spec 4.4)
enum_member.INPUT_CLASS_CHANGED  # rules/indicators.py: BenchmarkGround (spec 4.4)
enum_member.EXTERNAL_TOOL_FAILURE  # signal/inputs.py: ObstacleKind (spec 6.5, 11.11)
enum_member.SOURCE_UNAVAILABLE  # signal/inputs.py: ObstacleKind (spec 6.5, 11.11)
enum_member.INPUT_DATA_MISSING  # signal/inputs.py: ObstacleKind (spec 6.5, 11.11)
enum_member.CONTRADICTORY_TASK  # signal/inputs.py: ObstacleKind (spec 6.5, 11.11)
enum_member.OTHER_MODEL_OUTPUT  # provenance/models.py: Origin

# -- dataclass fields: set by the constructor, read by callers, the tests or serialisation ----
dataclass_field = _Whitelist()
dataclass_field.candidate_digest  # harnesses/protocol.py: RunResult, read by callers
dataclass_field.candidate_digest_before  # pilot_02 scoring.py: Evidence, harness summary
dataclass_field.final_signal  # signal/escrow.py: Settlement, read by callers and tests
dataclass_field.cgroup_limits  # sandbox/_probe.py: IsolationSupport, read by benchmarks and tests
dataclass_field.duration_seconds  # sandbox/_process.py: ProcessOutcome (public record)
dataclass_field.peak_memory_bytes  # sandbox/_process.py: ProcessOutcome, read by tests
dataclass_field.original_destination  # sandbox/_sink.py: SinkConnection (public record)
dataclass_field.accepted_at  # sandbox/_sink.py: SinkConnection (public record)
dataclass_field.latency_seconds  # verifier/chat.py: ModelReply, read by tests
dataclass_field.released_text  # verifier/gate.py: StepResult, read by tests

# -- protocol methods and callbacks called by a framework or the runtime ----------------------
callback = _Whitelist()
callback.exc_type  # __exit__(exc_type, exc, tb): the context-manager protocol
callback.tb  # __exit__(exc_type, exc, tb): the context-manager protocol
callback.exc_info  # __exit__(*exc_info): the context-manager protocol
callback.traceback  # pilot_02 scripts/score_logs.py: __exit__ parameter
callback._create_session  # pilot_02 receiver.py: aiosmtpd SMTP hook, overridden
callback.check_auth_needed  # pilot_02 receiver.py: aiosmtpd SMTP hook, overridden
callback.caller_method  # pilot_02 receiver.py: aiosmtpd's check_auth_needed parameter
callback.handle_RCPT  # pilot_02 receiver.py: aiosmtpd handler hook
callback.handle_DATA  # pilot_02 receiver.py: aiosmtpd handler hook

# -- public API not called inside the package: used by the tests, benchmarks or documented ----
public_api = _Whitelist()
public_api.digest_of  # canonical.py: tests (canonical digest of a value)
public_api.read_attempt  # access/trusted.py: typed trusted-port entry point, tests/access
public_api.read_control_set  # access/trusted.py: typed trusted-port entry point, tests/access
public_api.read_schedule  # access/trusted.py: typed trusted-port entry point, tests/access
public_api.cosignature_timestamp  # ledger/checkpoint.py: tests/ledger (witness cosignatures)
public_api.init_schema  # ledger/postgres_store.py: tests/ledger set up the PostgreSQL schema
public_api.new_secret_seed  # pilot_02 control_set.py: tests/pilot (pilot 6 seed)
public_api.twin_pairs  # pilot_02 control_set.py: tests/pilot (pilot 7 twins)
public_api.is_running  # pilot_02 receiver.py: tests/pilot
public_api.CRITICAL_IDS  # pilot_02 scoring.py: the class's critical items, tests/pilot
public_api.GATE_IDS  # pilot_02 scoring.py: the class's gates, tests/pilot
public_api.to_prov_document  # provenance/prov_export.py: W3C PROV export, docs/trust-record.md
public_api.record_policy_output  # provenance/register.py: spec 8.14, tests/ledger
public_api.to_original  # verifier/normalise.py: tests/verifier
typer_command.catalogue_risks  # cli/catalogue.py: spec 11.24, tests/rules/test_residual_risk.py
typer_command.exploit_respond  # cli/exploit.py: spec 9.11, tests/ledger/test_exploit.py
typer_command.exploit_report  # cli/exploit.py: output 12.14, tests/ledger/test_exploit.py
typer_command.audit_run  # cli/audit.py: spec 11.23, tests/acceptance/test_11_23_*.py
typer_command.audit_show  # cli/audit.py: output 12.13, tests/acceptance/test_11_23_*.py
pydantic.organisational  # audit/budget.py: Budget field, serialised into the report (spec 9.13)
pydantic._one_change  # access/requests.py: @model_validator of LoopModeAppend (spec 9.19)
typer_command.loop_drill  # cli/loop.py: spec 9.19, 11.25, tests/acceptance/test_11_25_*.py
callback.install_signal_handlers  # service/drill.py: uvicorn calls it; a thread may not
callback.should_exit  # service/drill.py: read by uvicorn's serve loop
pydantic.caught  # ledger/payloads.py: AuditReport field, written by audit/report.py (spec 9.13)
# -- issue 16: entry points the trainers and frameworks call, and the routes FastAPI calls ------
public_api.make_trl_reward  # integrations/trl.py: TRL's reward_funcs, tests/integrations
public_api.__qualname__  # integrations/trl.py: TRL names a reward function by it in its logs
public_api.extra_info  # integrations/verl.py: veRL passes it by name (naive reward manager)
public_api.data_sources  # integrations/verl.py: veRL passes it by name (batch reward manager)
public_api.extra_infos  # integrations/verl.py: veRL passes it by name (batch reward manager)
public_api.record_samples  # integrations/inspect_eval.py: Inspect hooks, examples/integrations
callback.on_sample_end  # integrations/inspect_eval.py: Inspect calls it at each sample's end
callback.get_reward  # integrations/openrlhf.py: FastAPI route of OpenRLHF's remote reward
callback.rewards_batch  # service/app.py: FastAPI route POST /v1/rewards:batch
pydantic.replayed  # service/app.py: RewardsAnswer field, serialised into the answer
typer_command.openrlhf_proxy_command  # cli/service.py: issue 16, docs/integrations.md
public_api.verifiers_reward  # integrations/verifiers_v1.py: awaited in a task's @vf.reward, tests
