from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from diagnosis import views as diagnosis_views

urlpatterns = [
    path("healthz", diagnosis_views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico on every page, admin included.
    path(
        "favicon.ico",
        RedirectView.as_view(url=static("favicon.svg"), permanent=True),
        name="favicon",
    ),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("api/", include("diagnosis.api.urls")),
    path("audit/", include("audit.urls")),
    path("", include("chat.urls")),
]

handler500 = "diagnosis.api.errors.server_error"
