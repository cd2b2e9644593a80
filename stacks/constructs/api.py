"""The REST API in front of the ingest function: API-key auth, usage plan and throttling."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from constructs import Construct


class IngestApi(Construct):
    """``LambdaRestApi`` (proxy, every method needs an API key) with one key on a usage plan."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: lambda_.IFunction,
        stage_name: str = "prod",
        rate_limit: float = 100,
        burst_limit: int = 200,
    ) -> None:
        super().__init__(scope, construct_id)
        self.rest_api = apigw.LambdaRestApi(
            self,
            "RestApi",
            handler=handler,
            proxy=True,
            rest_api_name=f"{Stack.of(self).stack_name}-api",
            description="Hourglass delay queue API",
            cloud_watch_role=False,
            api_key_source_type=apigw.ApiKeySourceType.HEADER,
            default_method_options=apigw.MethodOptions(api_key_required=True),
            deploy_options=apigw.StageOptions(
                stage_name=stage_name,
                throttling_rate_limit=rate_limit,
                throttling_burst_limit=burst_limit,
            ),
        )
        self.api_key = self.rest_api.add_api_key("ApiKey")
        self.usage_plan = self.rest_api.add_usage_plan(
            "UsagePlan",
            description="Per-key throttling for Hourglass clients",
            throttle=apigw.ThrottleSettings(rate_limit=rate_limit, burst_limit=burst_limit),
            api_stages=[apigw.UsagePlanPerApiStage(api=self.rest_api, stage=self.rest_api.deployment_stage)],
        )
        self.usage_plan.add_api_key(self.api_key)
        # The web console's static page is public (its API calls carry the key the user enters).
        # A proxying LambdaRestApi refuses root.add_resource, so the resources are built directly.
        integration = apigw.LambdaIntegration(handler)
        console = apigw.Resource(self, "Console", parent=self.rest_api.root, path_part="console")
        console.add_method("GET", integration, api_key_required=False)
        assets = apigw.Resource(self, "ConsoleAsset", parent=console, path_part="{asset}")
        assets.add_method("GET", integration, api_key_required=False)

    @property
    def url(self) -> str:
        """Invoke URL of the deployed stage."""
        return self.rest_api.url
