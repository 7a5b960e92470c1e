// Swagger UI's start-up for /docs, served as a file (the page's CSP allows no inline script): the OpenAPI
// document's URL comes from the container's data-spec-url attribute (api/templates/docs/swagger_ui.html).
"use strict";
window.addEventListener("load", function () {
  var container = document.getElementById("swagger-ui-container");
  window.ui = SwaggerUIBundle({url: container.dataset.specUrl, dom_id: "#swagger-ui-container"});
});
