"""Console pages of the execution plane (filled in below)."""
from django.http import Http404


def _todo(request, **kwargs):
    raise Http404


reconciliation_list = reconciliation_detail = reconciliation_resolve = credential_list = credential_delete = \
    mcp_server_list = _todo
