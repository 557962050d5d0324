// The console's browser code: each page's shell names itself in <body data-page>, and its module
// fills it from the JSON API.
import { setupTimeZone } from "./util.js";
import overview from "./pages/overview.js";
import topics from "./pages/topics.js";
import topic from "./pages/topic.js";
import messages from "./pages/messages.js";
import groups from "./pages/groups.js";
import group from "./pages/group.js";
import keeper from "./pages/keeper.js";
import transactions from "./pages/transactions.js";
import shareGroups from "./pages/share_groups.js";
import shareGroup from "./pages/share_group.js";
import links from "./pages/links.js";
import link from "./pages/link.js";
import schemas from "./pages/schemas.js";
import schema from "./pages/schema.js";
import balancer from "./pages/balancer.js";

const pages = {
  overview, topics, topic, messages, groups, group, keeper, transactions,
  "share-groups": shareGroups, "share-group": shareGroup, links, link, schemas, schema, balancer,
};

document.addEventListener("DOMContentLoaded", () => {
  const start = pages[document.body.dataset.page];
  const rerender = start ? start() : undefined;
  setupTimeZone(() => { if (typeof rerender === "function") rerender(); });
});
