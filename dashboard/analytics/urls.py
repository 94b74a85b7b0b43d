from django.urls import path

from dashboard.analytics import views

app_name = "analytics"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("run/", views.run_now, name="run"),
    path("runs/<int:pk>/status.json", views.run_status, name="run_status"),
    path("<slug:slug>/", views.chart, name="chart"),
    path("<slug:slug>.csv", views.chart_csv, name="chart_csv"),
]
