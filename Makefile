# Hourglass: `make dev` runs the whole stack locally, `make test` runs every test.
# Both create .venv from requirements*.txt on first use (and again when those files change).
# `make dev DEPLOY=cdk` deploys the stack with the real CDK CLI into MiniStack instead (the Lambdas run
# there); `make tools` installs what that needs: .venv-ministack and the pinned CDK CLI in node_modules.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MINISTACK_VENV := .venv-ministack
MINISTACK_STAMP := $(MINISTACK_VENV)/.installed
CDK_STAMP := node_modules/.installed
# `make dev DEPLOY=cdk`: `cdk bootstrap` + `cdk deploy` into MiniStack; empty: the in-process runtime on moto.
DEPLOY ?=
export PYTHONPATH := lambdas:.
# The CDK's jsii prints a 12-line banner on every synth when Node 20 (end-of-life) is installed;
# check-node says it once instead.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION ?= 20

.PHONY: dev test test-slow test-console test-realtime test-upgrade total-queue test-deployed smoke tools lint synth bench bench-modes bench-deployed soak model spark-schedule spark-report sample clean \
	check-node check-java check-chromium

$(STAMP): requirements.txt requirements-dev.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"' \
		|| { echo "error: Python 3.11 or newer is required ($(PYTHON))"; exit 1; }
	@echo "hourglass: building $(VENV) from requirements.txt and requirements-dev.txt (first run, or they changed):"
	@echo "hourglass:   about 4-5 minutes on a laptop (CDK, moto, PySpark, Playwright); later runs start at once."
	@echo "hourglass: [1/3] creating $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install --quiet --upgrade pip
	@echo "hourglass: [2/3] installing packages (the long part; pip prints only errors)"
	@start=$$(date +%s); $(BIN)/pip install --quiet -r requirements.txt -r requirements-dev.txt \
		&& echo "hourglass:   packages installed in $$(( $$(date +%s) - start )) s"
	@echo "hourglass: [3/3] linking the checkout into $(VENV)"
	@# The venv's python finds the Lambda package and the repo's tools (`python -m devstack...`) from any shell.
	@$(BIN)/python -c 'import site, pathlib; pathlib.Path(site.getsitepackages()[0], "hourglass-checkout.pth").write_text("$(CURDIR)/lambdas\n$(CURDIR)\n")'
	@touch $(STAMP)
	@echo "hourglass: $(VENV) is ready"

# MiniStack pins a botocore the project's boto3 cannot share: a venv of its own, which is also the
# deployed Lambdas' runtime (requirements-ministack.txt).
$(MINISTACK_STAMP): requirements-ministack.txt
	$(PYTHON) -m venv $(MINISTACK_VENV)
	$(MINISTACK_VENV)/bin/pip install --quiet --upgrade pip
	$(MINISTACK_VENV)/bin/pip install --quiet -r requirements-ministack.txt
	touch $(MINISTACK_STAMP)

# The CDK CLI, pinned in package-lock.json, installed locally (npx cdk / node_modules/.bin/cdk).
$(CDK_STAMP): package.json package-lock.json
	@$(MAKE) --no-print-directory check-node
	npm ci --no-audit --no-fund --loglevel=error
	touch $(CDK_STAMP)

tools: $(MINISTACK_STAMP) $(CDK_STAMP)

check-node:
	@command -v node >/dev/null 2>&1 || { echo "error: Node.js is missing: the CDK (jsii) needs it to synthesize the stack. Install Node.js 18+ (e.g. apt-get install nodejs)."; exit 1; }
	@node -e 'process.exit(+process.versions.node.split(".")[0] <= 20 ? 1 : 0)' \
		|| echo "note: Node.js $$(node --version) is end-of-life for the CDK; it still works, but Node 22 or 24 is supported."

check-java:
	@command -v java >/dev/null 2>&1 || { echo "error: Java is missing: PySpark needs a JRE 17+. Install it (e.g. apt-get install openjdk-17-jre-headless)."; exit 1; }

# The console's browser tests drive the system's Chromium (browser downloads do not work offline).
check-chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
		|| echo "note: Chromium is missing: the console's browser tests will be skipped. Install it with: apt-get update && apt-get install -y chromium"

# `make dev` keeps its queues and messages in .hourglass/state across restarts; `make dev FRESH=1` starts empty.
dev: $(STAMP) check-node $(if $(filter cdk ministack,$(DEPLOY)),tools)
	HOURGLASS_DEPLOY=$(DEPLOY) $(BIN)/python -m devstack $(if $(FRESH),--fresh)

# One process: every fixture stops the runtime, servers and threads it started, and moto's in-process
# state is emptied between modules (tests/conftest.py), so no suite runs behind another's leftovers.
# It leaves the long runs to `make test-slow` (pytest markers `slow` and `long_form`, pyproject.toml).
test: $(STAMP) check-node check-java check-chromium
	$(BIN)/python -m pytest -q -p no:cacheprovider

# What `make test` leaves out for time (CI runs both; ~10 minutes on 2 cores): the `slow` tests (the total-queue
# run under every quick fault with its liveness check, the benchmark smoke run, a 30 s Retry-After waited out,
# the sweep over a day the autumn clock change skips, the model's two replays of a paused queue, the runtime killed
# while it delivers and while an occurrence starts, poison timers sent to the DLQ), and the `long_form` ones with the example counts
# `make test` used to run: the model test's 30 fixed stories, the fault state machine's 25, 60 OpenAPI
# examples per operation.
test-slow: $(STAMP) check-node
	HOURGLASS_MODEL_EXAMPLES=30 HOURGLASS_FAULT_MACHINE_EXAMPLES=25 HOURGLASS_OPENAPI_FUZZ_EXAMPLES=60 \
		$(BIN)/python -m pytest -q -p no:cacheprovider -o timeout=1800 -m "slow or long_form"

# The console's longer browser flows in Chromium (editing and deleting queues, tabs, search, row actions,
# purge, auto-refresh, charts); `make test` runs the representative ones. Screenshots: tests/artifacts/console/.
test-console: $(STAMP) check-chromium
	$(BIN)/python -m pytest -q -p no:cacheprovider -m console tests/clients/test_console_flows.py

# The end-to-end suite and the smoke test against the stack as deployed: `cdk deploy` into MiniStack,
# API Gateway with its key, the Lambdas, the SQS mapping and the EventBridge schedule; a later
# `cdk bootstrap` over the devstack's; README's "Deploy to AWS" word for word (~8-12 minutes on 2 cores).
# E2E_MODES=inprocess,deployed runs both modes side by side.
E2E_MODES ?= deployed
test-deployed: $(STAMP) tools
	HOURGLASS_E2E_MODES=$(E2E_MODES) $(BIN)/python -m pytest -q -p no:cacheprovider -o timeout=900 \
		tests/e2e/test_delivery.py tests/e2e/test_delivery_control.py tests/e2e/test_operations.py \
		tests/e2e/test_rate_limits.py tests/e2e/test_flow_keys.py tests/e2e/test_smoke.py tests/e2e/test_stack.py \
		tests/e2e/test_bootstrap.py tests/e2e/test_readme_deploy.py tests/e2e/test_crash_deployed.py \
		tests/e2e/test_aws_targets.py tests/e2e/test_windows.py tests/e2e/test_ordering.py

# The previous release's stack (tag UPGRADE_FROM) deployed into MiniStack with its own `cdk deploy`, messages put
# in flight, then HEAD deployed over it, and the rollback the other way round: nothing lost, early, duplicated or
# dead-lettered (docs/upgrades.md; ~15 minutes on 2 cores).
# v1.2.0 is commit 0b61823: a clone without the tag uses the commit.
UPGRADE_FROM ?= $(shell git rev-parse -q --verify refs/tags/v1.2.0 >/dev/null 2>&1 && echo v1.2.0 || echo 0b61823)
test-upgrade: $(STAMP) tools
	@git cat-file -e "$(UPGRADE_FROM)^{commit}" 2>/dev/null || git fetch -q --unshallow 2>/dev/null || true
	@git cat-file -e "$(UPGRADE_FROM)^{commit}" 2>/dev/null \
		|| { echo "error: the previous release $(UPGRADE_FROM) is not in this clone (a shallow clone? git fetch --unshallow)"; exit 1; }
	HOURGLASS_UPGRADE_FROM=$(UPGRADE_FROM) $(BIN)/python -m pytest -q -p no:cacheprovider -o timeout=1800 \
		tests/upgrade/test_upgrade.py

# Real-time end-to-end runs through the local runtime that `make test` leaves out for time (flow keys: ~1.5 min).
test-realtime: $(STAMP)
	HOURGLASS_E2E_MODES=inprocess HOURGLASS_E2E_REALTIME=1 $(BIN)/python -m pytest -q -p no:cacheprovider \
		-o timeout=900 tests/e2e/test_flow_keys.py tests/e2e/test_ordering.py

# Deployment smoke test against a deployed stack (real AWS: credentials from the usual chain):
# make smoke API_URL=https://abc123.execute-api.eu-west-1.amazonaws.com/prod/ API_KEY=...
# (SMOKE_LATE_LIMIT=s: how late a delivery may be and pass, 5 s by default)
smoke: $(STAMP)
	@if [ -z "$(API_URL)" ] || [ -z "$(API_KEY)" ]; then \
		echo "usage: make smoke API_URL=<the stack's ApiUrl output> API_KEY=<the key's value>"; exit 2; fi
	$(BIN)/python -m devstack.smoke --api-url "$(API_URL)" --api-key "$(API_KEY)" \
		$(if $(SMOKE_LATE_LIMIT),--late-limit $(SMOKE_LATE_LIMIT))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy -p hourglass -p devstack -p stacks -p pipeline -p bench -p hourglass_client
	$(BIN)/mypy app.py

synth: $(STAMP) check-node
	$(BIN)/python app.py

# Benchmarks against the budgets of bench/README.md; tables on stdout, JSON in bench/results/latest.json.
bench: $(STAMP) check-node
	$(BIN)/python -m bench

# The two local modes side by side (bench/modes.py): start-up, lateness, deliveries/s, ingest/s and
# conditional-write atomicity for moto + in-process vs. MiniStack as deployed.
bench-modes: $(STAMP) tools
	$(BIN)/python -m bench.modes

# A load run of the stack as deployed into MiniStack (bench/deployed_load.py), every DynamoDB request logged:
# ingest/s and deliveries/s on the hand-off and sweep paths, each item kind's writes and reads per message beside
# the capacity model's (bench/capacity_items.py), the busiest item and partition. JSON in
# bench/results/deployed_load.json; about 5 minutes on 2 cores. DEPLOYED_MESSAGES per path, DEPLOYED_CLIENTS POSTs at once.
DEPLOYED_MESSAGES ?= 1500
DEPLOYED_CLIENTS ?= 16
bench-deployed: $(STAMP) tools
	$(BIN)/python -m bench.deployed_load --messages $(DEPLOYED_MESSAGES) --clients $(DEPLOYED_CLIENTS)

# The total-queue check at length: every fault, SIGKILLs of the runtime, a drain that waits out the
# recovery sweep. SOAK_ROUNDS rounds of 1,500 messages, each ended by a kill -9; about 5 + 2 x SOAK_ROUNDS minutes.
# Then the fuzz through delivery with SOAK_FUZZ_EXAMPLES examples (`make test` runs 20; ~1.5 s each).
SOAK_ROUNDS ?= 5
SOAK_FUZZ_EXAMPLES ?= 300
# The whole-system model test (tests/model): `make test` runs 10 fixed examples, `make test-slow` 30, soak this many.
SOAK_MODEL_EXAMPLES ?= 500
# The total-queue run under every quick fault alone (part of `make test-slow`), ending with its liveness check
# (every message ended or has a way forward); `make soak` runs its long form with SIGKILLs.
total-queue: $(STAMP) check-node
	$(BIN)/python -m pytest -q -p no:cacheprovider -m slow tests/faults/test_total_queue.py -k "not soak" -rA

soak: $(STAMP) check-node
	HOURGLASS_SOAK=1 HOURGLASS_SOAK_ROUNDS=$(SOAK_ROUNDS) $(BIN)/python -m pytest -q -p no:cacheprovider \
		-o timeout=3600 tests/faults/test_total_queue.py -k soak -rA
	HOURGLASS_DELIVERY_FUZZ_EXAMPLES=$(SOAK_FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -p no:cacheprovider \
		-o timeout=3600 tests/fuzz/test_through_delivery.py
	$(MAKE) model MODEL_EXAMPLES=$(SOAK_MODEL_EXAMPLES)

# The model test with new draws (make test replays fixed ones): hunts holes; prints a failing story's steps.
MODEL_EXAMPLES ?= 100
model: $(STAMP)
	HOURGLASS_MODEL_RANDOM=1 HOURGLASS_MODEL_EXAMPLES=$(MODEL_EXAMPLES) $(BIN)/python -m pytest -q -p no:cacheprovider \
		-o timeout=7200 tests/model/test_system_model.py -rA

clean:
	rm -rf $(VENV) $(MINISTACK_VENV) node_modules .hourglass cdk.out dist

# --- The PySpark pipeline (pipeline/README.md). The jobs talk to the `make dev` stack unless
# AWS_ENDPOINT_URL names another endpoint; its lookahead/shards settings are passed on.
# Writes into the local emulator run at 700-1,500 rows/s (100k rows in 1-2.5 min); --dry-run
# (pipeline/README.md) validates only, at ~10k rows/s.
ROWS ?= 10000
# START: the sample's deliver_at times count from it; NOW: the schedule job's delays count from it (RFC 3339).
SAMPLE ?= pipeline/out/sample.csv
INPUT ?= $(SAMPLE)
OUT ?= pipeline/out/report
SPARK_ENDPOINT ?= $(or $(AWS_ENDPOINT_URL),http://127.0.0.1:$(or $(HOURGLASS_EMULATOR_PORT),4566))
SPARK_API ?= http://127.0.0.1:$(or $(HOURGLASS_API_PORT),8080)
# More arguments of the schedule job. Loopback callbacks need none: devstack.config's exports carry
# HOURGLASS_ALLOW_PRIVATE_CALLBACKS as the local runtime has it (1 unless set).
SCHEDULE_ARGS ?=
STACK_ARGS = $(if $(HOURGLASS_LOOKAHEAD),--lookahead $(HOURGLASS_LOOKAHEAD)) \
	$(if $(HOURGLASS_HANDOFF_SAFETY),--handoff-safety $(HOURGLASS_HANDOFF_SAFETY)) \
	$(if $(HOURGLASS_SHARDS),--shards $(HOURGLASS_SHARDS))

.PHONY: spark-sample emr-package emr-local

# --- EMR Serverless (pipeline/README.md, "On AWS"). emr-package builds what start-job-run submits:
# dist/emr/main.py, hourglass_pipeline.zip and pyenv.tar.gz (a relocatable Python with boto3 and
# matplotlib, packed from EMR_PYTHON; for AWS build it on Amazon Linux 2023, see the README).
# emr-local runs that package with spark-submit on local-cluster[2,1,1024] against the stack deployed
# into a moto server (~3-5 min on 2 idle cores; not part of `make test`: it needs PyPI for the runtime).
EMR_DIST ?= dist/emr
EMR_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))

emr-package:
	$(EMR_PYTHON) -m pipeline.packaging --out $(EMR_DIST) --python $(EMR_PYTHON)

emr-local: $(STAMP) check-node check-java emr-package
	HOURGLASS_EMR_PACKAGE=$(EMR_DIST) $(BIN)/python -m pytest -q -p no:cacheprovider -m emr -o timeout=2400 \
		tests/pipeline/test_emr_local.py -rA

spark-sample: $(STAMP) check-java
	$(BIN)/python -m pipeline sample --rows $(ROWS) --out $(SAMPLE) $(if $(START),--start $(START))

spark-schedule: $(STAMP) check-java
	@if [ "$(INPUT)" = "$(SAMPLE)" ]; then $(BIN)/python -m pipeline sample --create-queues $(SPARK_API) --endpoint-url $(SPARK_ENDPOINT); fi
	@# Rows' targets are checked against the allow-lists `make dev`'s functions apply (devstack.config).
	eval "$$($(BIN)/python -m devstack.config)" && \
	$(BIN)/python -m pipeline schedule --input $(INPUT) --endpoint-url $(SPARK_ENDPOINT) $(STACK_ARGS) $(if $(NOW),--now $(NOW)) \
		$(SCHEDULE_ARGS) --rejects pipeline/out/rejects.csv --summary pipeline/out/schedule-summary.json

spark-report: $(STAMP) check-java
	$(BIN)/python -m pipeline report --endpoint-url $(SPARK_ENDPOINT) --out $(OUT) $(if $(DUE_AFTER),--due-after $(DUE_AFTER))
