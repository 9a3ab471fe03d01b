from django.urls import path

from chat import views

app_name = "chat"

urlpatterns = [
    path("", views.conversation_list, name="conversation_list"),
    path("conversations/new/", views.conversation_new, name="conversation_new"),
    path("conversations/<int:pk>/", views.conversation_detail, name="conversation_detail"),
    path(
        "conversations/<int:pk>/questions/",
        views.conversation_question,
        name="conversation_question",
    ),
    path("sessions/<uuid:public_id>/", views.session_detail, name="session_detail"),
    path("sessions/<uuid:public_id>/progress/", views.session_progress, name="session_progress"),
    path("sessions/<uuid:public_id>/retry/", views.session_retry, name="session_retry"),
    path("sessions/<uuid:public_id>/feedback/", views.session_feedback, name="session_feedback"),
]
