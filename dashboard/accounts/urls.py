"""Routes of accounts: login and logout (``/accounts/``, global names ``login`` / ``logout``) and the
user management pages (``admin_urlpatterns``, mounted by ``dashboard.urls`` at ``/actions/admin/``
in the ``manage`` namespace)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import URLPattern, URLResolver, path

from dashboard.accounts import user_admin

urlpatterns: list[URLPattern | URLResolver] = [
    path(
        "login/",
        login_not_required(auth_views.LoginView.as_view(redirect_authenticated_user=True)),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
]

admin_urlpatterns: list[URLPattern | URLResolver] = [
    path("users/", user_admin.user_list, name="users"),
    path("users/<int:pk>/", user_admin.user_edit, name="user-edit"),
]
