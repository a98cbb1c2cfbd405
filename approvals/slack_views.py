"""The endpoint a tenant's Slack app posts button clicks to. No session and no CSRF token: Slack's
signature with the tenant's signing secret is the credential (approvals.slack)."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from approvals import slack
from console.api_errors import error_body
from console.models import Tenant

ERROR_CLASSES = {401: "authentication", 409: "conflict", 400: "validation"}


@csrf_exempt
@require_POST
def actions(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    """Verify, decide as the linked user, and acknowledge at once; the message is updated from a worker."""
    tenant = Tenant.objects.filter(slug=tenant_slug).first()
    try:
        slack.verify_request(
            tenant=tenant,
            secret=slack.signing_secret_of(tenant) if tenant else "",
            timestamp=request.headers.get("X-Slack-Request-Timestamp", ""),
            signature=request.headers.get("X-Slack-Signature", ""),
            body=request.body,
        )
        click = slack.parse_click(request.body)
    except slack.SlackRefused as exc:
        return JsonResponse(error_body(ERROR_CLASSES[exc.status], exc.code, str(exc)), status=exc.status)
    answer = slack.answer_click(tenant=tenant, click=click)
    slack.answer_later(response_url=click.response_url, body=answer)
    return HttpResponse(status=200)
