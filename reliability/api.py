from django.http import Http404


def _todo(request, **kwargs):
    raise Http404


pipeline_submit = pipeline_detail = job_complete = _todo
