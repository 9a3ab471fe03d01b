from django.urls import path

from audit import views

app_name = "audit"

urlpatterns = [
    path("dashboard", views.dashboard, name="dashboard"),
    path("sessions/<uuid:public_id>/", views.session_read, name="session_read"),
    path("sessions/<uuid:public_id>/review", views.session_review, name="session_review"),
]
