"""The REST API in front of the ingest function: authentication (API key, IAM or both), usage plan, throttling."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from hourglass import contract


class IngestApi(Construct):
    """``LambdaRestApi`` (proxy) whose every method needs what `auth` names: an API key (one key on a
    usage plan), AWS SigV4 (IAM authorization, with a managed policy granting `execute-api:Invoke` on
    the whole API), or both (API Gateway checks the signature, then the key)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: lambda_.IFunction,
        auth: str = contract.AUTH_API_KEY,
        stage_name: str = "prod",
        rate_limit: float = 100,
        burst_limit: int = 200,
    ) -> None:
        super().__init__(scope, construct_id)
        if auth not in contract.AUTH_MODES:
            raise ValueError(f"auth must be one of {', '.join(contract.AUTH_MODES)}, got {auth!r}")
        keyed = auth in (contract.AUTH_API_KEY, contract.AUTH_BOTH)
        signed = auth in (contract.AUTH_IAM, contract.AUTH_BOTH)
        self.rest_api = apigw.LambdaRestApi(
            self,
            "RestApi",
            handler=handler,
            proxy=True,
            rest_api_name=f"{Stack.of(self).stack_name}-api",
            description="Hourglass delay queue API",
            cloud_watch_role=False,
            api_key_source_type=apigw.ApiKeySourceType.HEADER,
            default_method_options=apigw.MethodOptions(
                api_key_required=keyed,
                authorization_type=apigw.AuthorizationType.IAM if signed else apigw.AuthorizationType.NONE,
            ),
            deploy_options=apigw.StageOptions(
                stage_name=stage_name,
                throttling_rate_limit=rate_limit,
                throttling_burst_limit=burst_limit,
            ),
        )
        self.api_key: apigw.IApiKey | None = None
        if keyed:
            self.api_key = self.rest_api.add_api_key("ApiKey")
            usage_plan = self.rest_api.add_usage_plan(
                "UsagePlan",
                description="Per-key throttling for Hourglass clients",
                throttle=apigw.ThrottleSettings(rate_limit=rate_limit, burst_limit=burst_limit),
                api_stages=[apigw.UsagePlanPerApiStage(api=self.rest_api, stage=self.rest_api.deployment_stage)],
            )
            usage_plan.add_api_key(self.api_key)
        # The stage's methods as IAM resources: `<this>/<METHOD>/<path>` (a per-queue policy appends
        # `/*/v1/queues/<name>` and `/*/v1/queues/<name>/*`).
        self.execute_arn = Stack.of(self).format_arn(
            service="execute-api", resource=self.rest_api.rest_api_id, resource_name=stage_name
        )
        self.invoke_policy: iam.ManagedPolicy | None = None
        if signed:
            # Queues are made at run time by API calls, so the stack cannot know their names: it grants
            # the whole API; docs/authentication.md shows a policy per queue.
            self.invoke_policy = iam.ManagedPolicy(
                self,
                "InvokePolicy",
                description="Calls every method of the Hourglass API (attach to the roles that use it)",
                statements=[
                    iam.PolicyStatement(
                        sid="InvokeHourglassApi",
                        actions=["execute-api:Invoke"],
                        resources=[self.rest_api.arn_for_execute_api("*", "/*", stage_name)],
                    )
                ],
            )
        # The web console's static page is public (its API calls carry the key the user enters).
        # A proxying LambdaRestApi refuses root.add_resource, so the resources are built directly.
        integration = apigw.LambdaIntegration(handler)
        public = apigw.AuthorizationType.NONE
        console = apigw.Resource(self, "Console", parent=self.rest_api.root, path_part="console")
        console.add_method("GET", integration, api_key_required=False, authorization_type=public)
        assets = apigw.Resource(self, "ConsoleAsset", parent=console, path_part="{asset}")
        assets.add_method("GET", integration, api_key_required=False, authorization_type=public)

    @property
    def url(self) -> str:
        """Invoke URL of the deployed stage."""
        return self.rest_api.url
