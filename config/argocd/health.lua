-- Argo CD health check for every Deckhand kind (PodSet, JobWatcher,
-- ClusterJobWatcher, ModelBox, PodBugger). Each kind's status follows one
-- contract (docs/operations/gitops.md): status.observedGeneration, a Ready condition
-- (True when settled, False while converging) and a Stalled condition (True
-- when it cannot progress until someone changes something), each condition
-- with the generation it judged. The same conditions give kstatus (Flux,
-- kpt, cli-utils) Current, InProgress and Failed.
local hs = { status = "Progressing", message = "Waiting for the controller" }
if obj.status == nil then
  return hs
end
local generation = obj.metadata.generation
if generation ~= nil and (obj.status.observedGeneration == nil or obj.status.observedGeneration < generation) then
  hs.message = "Waiting for the controller to observe generation " .. generation
  return hs
end
local ready, stalled = nil, nil
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" then
      ready = c
    elseif c.type == "Stalled" then
      stalled = c
    end
  end
end
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = stalled.message or stalled.reason
  return hs
end
if ready == nil then
  return hs
end
if generation ~= nil and ready.observedGeneration ~= nil and ready.observedGeneration < generation then
  hs.message = "Waiting for the controller to judge generation " .. generation
  return hs
end
hs.message = ready.message or ready.reason
if ready.status == "True" then
  if ready.reason == "Suspended" then
    hs.status = "Suspended"
  else
    hs.status = "Healthy"
  end
end
return hs
