from django.urls import path

from traces.api import views

app_name = "traces_api"

urlpatterns = [
    path("traces/spans", views.SpanBatchView.as_view(), name="span_batch"),
]
